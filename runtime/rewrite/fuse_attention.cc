#include "runtime/rewrite/fuse_attention.h"

#include <set>
#include <string>
#include <vector>

#include "runtime/rewrite/match.h"

namespace whittle {
namespace {

using namespace rewrite;  // IsOp, Producer, ConstValue, SoleConsumer (match.h)

class AttentionMatcher {
 public:
  explicit AttentionMatcher(const Graph& g) : g_(g) {}

  int Index(const Node* n) const { return n ? static_cast<int>(n - &g_.nodes()[0]) : -1; }

  // The node producing v when v is read only by `reader` (one read).
  const Node* SoleProducer(int v, int reader) const {
    if (v < 0 || SoleConsumer(g_, v) != reader) return nullptr;
    return Producer(g_, v);
  }

  bool IsTranspose(const Node* n, const std::vector<int64_t>& perm) const {
    return n && IsOp(*n, "Transpose") && n->inputs.size() == 1 && n->attrs.GetInts("perm") == perm;
  }

  // Ints given as attribute `name` or as constant input `slot` (opset 13+).
  std::vector<int64_t> IntsArg(const Node& n, const char* name, size_t slot) const {
    if (n.attrs.Has(name)) return n.attrs.GetInts(name);
    const Tensor* t = rewrite::ConstInput(g_, n, slot);
    if (!t || t->dtype() != DType::kInt64) return {};
    return std::vector<int64_t>(t->data<int64_t>(), t->data<int64_t>() + t->numel());
  }

  // n = Squeeze(split output, axes [0]); returns the Split node and which output it reads.
  const Node* SqueezedSplit(const Node* n, int* which) const {
    if (!n || !IsOp(*n, "Squeeze") || IntsArg(*n, "axes", 1) != std::vector<int64_t>{0}) return nullptr;
    const Node* split = SoleProducer(n->inputs[0], Index(n));
    if (!split || !IsOp(*split, "Split") || split->outputs.size() != 3 || split->attrs.GetInt("axis", 0) != 0)
      return nullptr;
    const std::vector<int64_t> sizes = IntsArg(*split, "split", 1);
    if (!sizes.empty() && sizes != std::vector<int64_t>{1, 1, 1}) return nullptr;
    for (int i = 0; i < 3; ++i)
      if (split->outputs[static_cast<size_t>(i)] == n->inputs[0]) *which = i;
    return split;
  }

  // A scalar float constant, as its value.
  bool Scalar(int v, float* out) const {
    const Tensor* t = ConstValue(g_, v);
    if (!t || t->dtype() != DType::kFloat32 || t->numel() != 1) return false;
    *out = t->data<float>()[0];
    return true;
  }

  // A float32 value of one element (rank 0, or all dims 1), computed or constant.
  bool ScalarValue(int v) const {
    const Value& val = g_.value(v);
    if (val.dtype != DType::kFloat32 || !val.shape) return false;
    for (const Dim& d : *val.shape)
      if (!d.known() || d.value != 1) return false;
    return true;
  }

  // A float32 value whose shape broadcasts to that of `to` (a rank-4 [B, H, N, N] score tensor)
  // without growing it: rank <= 4, each dim (right-aligned) 1 or the same as to's.
  bool BroadcastsTo(int v, int to) const {
    const Value& val = g_.value(v);
    const Value& t = g_.value(to);
    if (val.dtype != DType::kFloat32 || !val.shape || !t.shape || t.shape->size() != 4 || val.shape->size() > 4)
      return false;
    const size_t off = 4 - val.shape->size();
    for (size_t i = 0; i < val.shape->size(); ++i) {
      const Dim& d = (*val.shape)[i];
      if (!(d.known() && d.value == 1) && d != (*t.shape)[off + i]) return false;
    }
    return true;
  }

  // Known dims of a value's inferred shape, or empty.
  std::vector<int64_t> KnownTail(int v, size_t rank, size_t from) const {
    const Value& val = g_.value(v);
    if (!val.shape || val.shape->size() != rank) return {};
    std::vector<int64_t> r;
    for (size_t i = from; i < rank; ++i) {
      if (!(*val.shape)[i].known()) return {};
      r.push_back((*val.shape)[i].value);
    }
    return r;
  }

 private:
  const Graph& g_;
};

}  // namespace

Status FuseAttention(Graph& g, int* count) {
  AttentionMatcher m(g);
  std::set<int> dead;
  std::vector<Node> fused;
  for (size_t si = 0; si < g.nodes().size(); ++si) {
    const Node& sm = g.nodes()[si];
    if (!IsOp(sm, "Softmax") || sm.inputs.size() != 1 || sm.outputs.size() != 1) continue;
    const int64_t axis = sm.attrs.GetInt("axis", -1);
    if (axis != -1 && axis != 3) continue;
    std::vector<int> nodes{static_cast<int>(si)};
    // Optional scale: Mul(S, s) / Div(S, 1/s) with s a constant, or Mul(S, s) with s a scalar
    // computed at run time (PyTorch derives it from the head dim: Pow(Cast(d), -0.5)).
    float scale = 1.f;
    int scale_input = -1, mask = -1;
    int scores = sm.inputs[0];
    const Node* sc = m.SoleProducer(scores, static_cast<int>(si));
    // Optional mask: Add(S, mask) right before the Softmax, mask broadcasting to S's shape.
    if (sc && IsOp(*sc, "Add") && sc->inputs.size() == 2) {
      int s_in = -1;
      for (int k = 0; k < 2 && s_in < 0; ++k) {
        const int cand = sc->inputs[static_cast<size_t>(k)], other = sc->inputs[static_cast<size_t>(1 - k)];
        const Node* p = m.SoleProducer(cand, m.Index(sc));
        if (p && (IsOp(*p, "MatMul") || IsOp(*p, "Mul") || IsOp(*p, "Div")) && m.BroadcastsTo(other, cand))
          s_in = cand, mask = other;
      }
      if (s_in < 0) continue;
      nodes.push_back(m.Index(sc));
      scores = s_in;
      sc = m.SoleProducer(scores, m.Index(sc));
    }
    if (sc && (IsOp(*sc, "Mul") || IsOp(*sc, "Div")) && sc->inputs.size() == 2) {
      float c;
      int other = -1;
      if (m.Scalar(sc->inputs[1], &c)) other = sc->inputs[0];
      else if (IsOp(*sc, "Mul") && m.Scalar(sc->inputs[0], &c)) other = sc->inputs[1];
      else if (IsOp(*sc, "Mul") && m.ScalarValue(sc->inputs[1])) other = sc->inputs[0], scale_input = sc->inputs[1];
      else if (IsOp(*sc, "Mul") && m.ScalarValue(sc->inputs[0])) other = sc->inputs[1], scale_input = sc->inputs[0];
      if (other < 0 || (scale_input < 0 && c == 0.f)) continue;
      if (scale_input < 0) scale = IsOp(*sc, "Mul") ? c : 1.f / c;
      nodes.push_back(m.Index(sc));
      scores = other;
      sc = m.SoleProducer(scores, m.Index(sc));
    }
    // S = MatMul(q, Transpose(k, [0, 1, 3, 2])).
    const Node* qk = sc;
    if (!qk || !IsOp(*qk, "MatMul") || qk->inputs.size() != 2) continue;
    nodes.push_back(m.Index(qk));
    const Node* kt = m.SoleProducer(qk->inputs[1], m.Index(qk));
    if (!m.IsTranspose(kt, {0, 1, 3, 2})) continue;
    nodes.push_back(m.Index(kt));
    const Node* qsq = m.SoleProducer(qk->inputs[0], m.Index(qk));
    const Node* ksq = m.SoleProducer(kt->inputs[0], m.Index(kt));
    // y = MatMul(P, v).
    const int pv_i = SoleConsumer(g, sm.outputs[0]);
    if (pv_i < 0) continue;
    const Node& pv = g.nodes()[static_cast<size_t>(pv_i)];
    if (!IsOp(pv, "MatMul") || pv.inputs.size() != 2 || pv.inputs[0] != sm.outputs[0]) continue;
    nodes.push_back(pv_i);
    const Node* vsq = m.SoleProducer(pv.inputs[1], pv_i);
    int wq = -1, wk = -1, wv = -1;
    const Node* split = m.SqueezedSplit(qsq, &wq);
    if (!split || m.SqueezedSplit(ksq, &wk) != split || m.SqueezedSplit(vsq, &wv) != split || wq != 0 || wk != 1 ||
        wv != 2)
      continue;
    nodes.insert(nodes.end(), {m.Index(qsq), m.Index(ksq), m.Index(vsq), m.Index(split)});
    // t = Transpose(Reshape(x) [B, N, 3, H, d], [2, 0, 3, 1, 4]).
    const Node* tr = m.SoleProducer(split->inputs[0], m.Index(split));
    if (!m.IsTranspose(tr, {2, 0, 3, 1, 4})) continue;
    const Node* rs = m.SoleProducer(tr->inputs[0], m.Index(tr));
    if (!rs || !IsOp(*rs, "Reshape")) continue;
    const std::vector<int64_t> hd = m.KnownTail(rs->outputs[0], 5, 2);  // [3, H, d]
    if (hd.size() != 3 || hd[0] != 3) continue;
    const int64_t heads = hd[1], head_dim = hd[2];
    const int x = rs->inputs[0];
    const std::vector<int64_t> xd = m.KnownTail(x, 3, 2);
    if (xd.size() != 1 || xd[0] != 3 * heads * head_dim || g.value(x).dtype != DType::kFloat32) continue;
    nodes.insert(nodes.end(), {m.Index(tr), m.Index(rs)});
    // out = Reshape(Transpose(y, [0, 2, 1, 3])) -> [B, N, H*d].
    const int ot_i = SoleConsumer(g, pv.outputs[0]);
    if (ot_i < 0 || !m.IsTranspose(&g.nodes()[static_cast<size_t>(ot_i)], {0, 2, 1, 3})) continue;
    const int or_i = SoleConsumer(g, g.nodes()[static_cast<size_t>(ot_i)].outputs[0]);
    if (or_i < 0 || !IsOp(g.nodes()[static_cast<size_t>(or_i)], "Reshape")) continue;
    const Node& out_rs = g.nodes()[static_cast<size_t>(or_i)];
    const std::vector<int64_t> od = m.KnownTail(out_rs.outputs[0], 3, 2);
    if (od.size() != 1 || od[0] != heads * head_dim) continue;
    nodes.insert(nodes.end(), {ot_i, or_i});
    bool taken = false;
    for (int n : nodes) taken |= dead.count(n) > 0;
    if (taken) continue;
    Node att;
    att.name = sm.name + "_attention";
    att.op_type = "Attention";
    att.domain = kWhittleDomain;
    att.inputs = {x, scale_input};
    if (mask >= 0) att.inputs.push_back(mask);
    if (scale_input < 0 && mask < 0) att.inputs.resize(1);
    att.outputs = {out_rs.outputs[0]};
    att.attrs.Set("heads", Attribute::Int(heads));
    att.attrs.Set("head_dim", Attribute::Int(head_dim));
    att.attrs.Set("scale", Attribute::Float(scale));
    fused.push_back(std::move(att));
    dead.insert(nodes.begin(), nodes.end());
  }
  g.RemoveNodes(dead);
  if (!fused.empty() && g.OpsetFor(kWhittleDomain) == 0) g.opset_imports[kWhittleDomain] = 1;
  for (Node& n : fused) g.AddNode(std::move(n));
  *count += static_cast<int>(fused.size());
  return Status::Ok();
}

}  // namespace whittle
