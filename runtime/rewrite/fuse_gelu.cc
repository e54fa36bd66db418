#include "runtime/rewrite/fuse_gelu.h"

#include <cmath>
#include <set>
#include <vector>

#include "runtime/rewrite/match.h"

namespace whittle {
namespace {

using rewrite::IsOp;
using rewrite::Producer;
using rewrite::SoleConsumer;

class GeluMatcher {
 public:
  explicit GeluMatcher(const Graph& g) : g_(g) {}

  // A float scalar constant within 1e-4 (relative) of want.
  bool IsScalar(int id, double want) const {
    const Tensor* t = rewrite::ConstValue(g_, id);
    if (!t || t->dtype() != DType::kFloat32 || t->numel() != 1) return false;
    return std::fabs(t->data<float>()[0] - want) <= 1e-4 * std::fabs(want);
  }
  // n is a binary op `op` with one operand the scalar `c`: returns the other operand, or -1.
  int OtherOfScalar(const Node& n, const char* op, double c) const {
    if (!IsOp(n, op) || n.inputs.size() != 2) return -1;
    if (IsScalar(n.inputs[1], c)) return n.inputs[0];
    if (std::string(op) != "Div" && IsScalar(n.inputs[0], c)) return n.inputs[1];
    return -1;
  }
  // The sole reader of value id, as a node index, or -1.
  int Next(int id) const { return SoleConsumer(g_, id); }
  const Node& At(int ni) const { return g_.nodes()[static_cast<size_t>(ni)]; }
  int IndexOf(const Node* n) const { return n ? static_cast<int>(n - &g_.nodes()[0]) : -1; }

  // Value feeding Erf as x/√2: sets *x and adds the scaling node to *nodes.
  bool ErfArgument(int in, int* x, std::vector<int>* nodes) const {
    const Node* p = Producer(g_, in);
    if (!p) return false;
    int v = OtherOfScalar(*p, "Div", std::sqrt(2.0));
    if (v < 0) v = OtherOfScalar(*p, "Mul", std::sqrt(0.5));
    if (v < 0) return false;
    *x = v;
    nodes->push_back(IndexOf(p));
    return true;
  }

  // Value feeding Tanh as √(2/π)·(x + 0.044715·x³).
  bool TanhArgument(int in, int* x, std::vector<int>* nodes) const {
    const Node* p = Producer(g_, in);
    if (!p) return false;
    const int inner = OtherOfScalar(*p, "Mul", std::sqrt(2.0 / M_PI));
    const Node* add = inner >= 0 && Next(inner) == IndexOf(p) ? Producer(g_, inner) : nullptr;
    if (!add || !IsOp(*add, "Add") || add->inputs.size() != 2) return false;
    for (int k = 0; k < 2; ++k) {
      const int cand_x = add->inputs[static_cast<size_t>(k)], cube_term = add->inputs[static_cast<size_t>(1 - k)];
      const Node* ct = Next(cube_term) == IndexOf(add) ? Producer(g_, cube_term) : nullptr;
      const int cube = ct ? OtherOfScalar(*ct, "Mul", 0.044715) : -1;
      std::vector<int> cube_nodes;
      if (cube < 0 || Next(cube) != IndexOf(ct) || !IsCube(cube, cand_x, &cube_nodes)) continue;
      *x = cand_x;
      nodes->insert(nodes->end(), {IndexOf(p), IndexOf(add), IndexOf(ct)});
      nodes->insert(nodes->end(), cube_nodes.begin(), cube_nodes.end());
      return true;
    }
    return false;
  }

  // id = x³ as Pow(x, 3), Mul(x, Mul(x, x)) or Mul(Mul(x, x), x).
  bool IsCube(int id, int x, std::vector<int>* nodes) const {
    const Node* p = Producer(g_, id);
    if (!p) return false;
    if (IsOp(*p, "Pow") && p->inputs.size() == 2 && p->inputs[0] == x && IsScalar(p->inputs[1], 3.0)) {
      nodes->push_back(IndexOf(p));
      return true;
    }
    if (!IsOp(*p, "Mul") || p->inputs.size() != 2) return false;
    for (int k = 0; k < 2; ++k) {
      if (p->inputs[static_cast<size_t>(k)] != x) continue;
      const int sq = p->inputs[static_cast<size_t>(1 - k)];
      const Node* q = Next(sq) == IndexOf(p) ? Producer(g_, sq) : nullptr;
      if (q && IsOp(*q, "Mul") && q->inputs.size() == 2 && q->inputs[0] == x && q->inputs[1] == x) {
        nodes->insert(nodes->end(), {IndexOf(p), IndexOf(q)});
        return true;
      }
    }
    return false;
  }

  // From t = 1 + f(..) (the Add node ai) to the value x·½·t: *out and the tail nodes.
  bool Tail(int ai, int x, int* out, std::vector<int>* nodes) const {
    const Node& a = At(ai);
    const int t = a.outputs[0];
    const int mi = Next(t);
    if (mi < 0 || !IsOp(At(mi), "Mul") || At(mi).inputs.size() != 2) return false;
    const Node& m = At(mi);
    const int other = m.inputs[0] == t ? m.inputs[1] : m.inputs[0];
    if (other == x) {  // (x · t) · ½
      const int hi = Next(m.outputs[0]);
      if (hi < 0 || OtherOfScalar(At(hi), "Mul", 0.5) != m.outputs[0]) return false;
      nodes->insert(nodes->end(), {mi, hi});
      *out = At(hi).outputs[0];
      return true;
    }
    const Node* h = Producer(g_, other);
    if (h && Next(other) == mi && OtherOfScalar(*h, "Mul", 0.5) == x) {  // (x · ½) · t
      nodes->insert(nodes->end(), {mi, IndexOf(h)});
      *out = m.outputs[0];
      return true;
    }
    if (OtherOfScalar(m, "Mul", 0.5) == t) {  // x · (t · ½)
      const int ni = Next(m.outputs[0]);
      if (ni < 0 || !IsOp(At(ni), "Mul") || At(ni).inputs.size() != 2) return false;
      const Node& n = At(ni);
      const int o = n.inputs[0] == m.outputs[0] ? n.inputs[1] : n.inputs[0];
      if (o != x) return false;
      nodes->insert(nodes->end(), {mi, ni});
      *out = n.outputs[0];
      return true;
    }
    return false;
  }

  // A GELU around the Erf or Tanh node fi: the input x, the output, and every node of it.
  bool Match(int fi, bool* tanh_form, int* x, int* out, std::vector<int>* nodes) const {
    const Node& f = At(fi);
    *tanh_form = IsOp(f, "Tanh");
    if ((!*tanh_form && !IsOp(f, "Erf")) || f.inputs.empty() || f.outputs.empty()) return false;
    if (Next(f.inputs[0]) != fi) return false;
    nodes->clear();
    nodes->push_back(fi);
    if (*tanh_form ? !TanhArgument(f.inputs[0], x, nodes) : !ErfArgument(f.inputs[0], x, nodes)) return false;
    const int ai = Next(f.outputs[0]);
    if (ai < 0 || OtherOfScalar(At(ai), "Add", 1.0) != f.outputs[0]) return false;
    nodes->push_back(ai);
    if (!Tail(ai, *x, out, nodes)) return false;
    return g_.value(*x).dtype == DType::kFloat32;
  }

 private:
  const Graph& g_;
};

}  // namespace

Status FuseGelu(Graph& g, int* count) {
  std::set<int> dead;
  std::vector<Node> fused;
  {
    GeluMatcher m(g);
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      bool tanh_form = false;
      int x = -1, out = -1;
      std::vector<int> nodes;
      if (!m.Match(static_cast<int>(i), &tanh_form, &x, &out, &nodes)) continue;
      bool taken = false;
      for (int n : nodes) taken |= dead.count(n) > 0;
      if (taken) continue;
      dead.insert(nodes.begin(), nodes.end());
      Node gelu;
      gelu.name = g.nodes()[i].name.empty() ? g.value(out).name + "/gelu" : g.nodes()[i].name + "/gelu";
      gelu.op_type = "Gelu";
      gelu.inputs = {x};
      gelu.outputs = {out};
      if (tanh_form) gelu.attrs.Set("approximate", Attribute::String("tanh"));
      fused.push_back(std::move(gelu));
    }
  }
  if (fused.empty()) return Status::Ok();
  g.RemoveNodes(dead);
  for (Node& n : fused) g.AddNode(std::move(n));
  *count += static_cast<int>(fused.size());
  return Status::Ok();
}

}  // namespace whittle
