#include "runtime/rewrite/fuse_layernorm.h"

#include <set>
#include <string>
#include <vector>

#include "runtime/rewrite/match.h"

namespace whittle {
namespace {

using namespace rewrite;  // IsOp, Producer, ConstValue, SoleConsumer (match.h)

// Rank of a float32 value with a known shape, else -1.
int64_t FloatRank(const Graph& g, int v) {
  const Value& val = g.value(v);
  if (val.dtype != DType::kFloat32 || !val.shape) return -1;
  return static_cast<int64_t>(val.shape->size());
}

// n is a ReduceMean over exactly the last axis of its input, keeping dims.
bool MeanOverLastAxis(const Graph& g, const Node& n) {
  if (!IsOp(n, "ReduceMean") || n.inputs.empty() || n.outputs.size() != 1) return false;
  const int64_t rank = FloatRank(g, n.inputs[0]);
  if (rank < 1 || n.attrs.GetInt("keepdims", 1) != 1) return false;
  std::vector<int64_t> axes = n.attrs.GetInts("axes");
  if (n.inputs.size() > 1 && n.inputs[1] >= 0) {
    const Tensor* t = ConstValue(g, n.inputs[1]);
    if (!t || t->dtype() != DType::kInt64) return false;
    axes.assign(t->data<int64_t>(), t->data<int64_t>() + t->numel());
  }
  return axes.size() == 1 && (axes[0] == -1 || axes[0] == rank - 1);
}

// A float32 constant with one value per element of the last dim (c values), any leading 1s.
bool PerChannel(const Graph& g, int v, int64_t c) {
  const Tensor* t = ConstValue(g, v);
  return t && t->dtype() == DType::kFloat32 && t->numel() == c && t->rank() >= 1 && t->dim(t->rank() - 1) == c;
}

// Binary node `op` reading `x` and a per-channel constant: the constant's value id, or -1.
int PerChannelOperand(const Graph& g, const Node& n, const char* op, int x, int64_t c) {
  if (!IsOp(n, op) || n.inputs.size() != 2 || n.outputs.size() != 1) return -1;
  const int other = n.inputs[0] == x ? n.inputs[1] : n.inputs[1] == x ? n.inputs[0] : -1;
  return other >= 0 && PerChannel(g, other, c) ? other : -1;
}

// The Add(mean, eps) -> Sqrt after a ReduceMean's output `mean`, each read once: the Sqrt's output
// id (its nodes appended to *nodes, ε in *eps), or -1.
int EpsSqrt(const Graph& g, int mean, float* eps, std::vector<int>* nodes) {
  const int ai = SoleConsumer(g, mean);
  if (ai < 0) return -1;
  const Node& add_eps = g.nodes()[static_cast<size_t>(ai)];
  if (!IsOp(add_eps, "Add") || add_eps.inputs.size() != 2) return -1;
  const Tensor* eps_t = ConstValue(g, add_eps.inputs[0] == mean ? add_eps.inputs[1] : add_eps.inputs[0]);
  if (!eps_t || eps_t->dtype() != DType::kFloat32 || eps_t->numel() != 1) return -1;
  const int qi = SoleConsumer(g, add_eps.outputs[0]);
  if (qi < 0 || !IsOp(g.nodes()[static_cast<size_t>(qi)], "Sqrt")) return -1;
  *eps = eps_t->data<float>()[0];
  nodes->push_back(ai);
  nodes->push_back(qi);
  return g.nodes()[static_cast<size_t>(qi)].outputs[0];
}

// A per-channel constant's values as a new [c] initializer, `fill` everywhere when v is -1.
int ChannelVector(Graph& g, int v, float fill, int64_t c, const std::string& name) {
  Tensor t(DType::kFloat32, {c});
  for (int64_t i = 0; i < c; ++i) t.data<float>()[i] = v >= 0 ? ConstValue(g, v)->data<float>()[i] : fill;
  return g.AddInitializer(g.UniqueName(name), std::move(t));
}

}  // namespace

Status FuseLayerNorm(Graph& g, int* count) {
  std::set<int> dead;
  std::vector<Node> fused;
  for (size_t mi = 0; mi < g.nodes().size(); ++mi) {
    const Node& mean = g.nodes()[mi];
    if (dead.count(static_cast<int>(mi)) || !MeanOverLastAxis(g, mean)) continue;
    const int x = mean.inputs[0];
    const Value& xv = g.value(x);
    const Dim last = xv.shape->back();
    if (!last.known()) continue;
    const int64_t c = last.value;
    std::vector<int> nodes{static_cast<int>(mi)};
    // d = Sub(x, mean)
    const int si = SoleConsumer(g, mean.outputs[0]);
    if (si < 0) continue;
    const Node& sub = g.nodes()[static_cast<size_t>(si)];
    if (!IsOp(sub, "Sub") || sub.inputs.size() != 2 || sub.inputs[0] != x || sub.inputs[1] != mean.outputs[0])
      continue;
    nodes.push_back(si);
    const int d = sub.outputs[0];
    if (g.IsGraphOutput(d)) continue;
    const std::vector<int> readers = g.Consumers(d);
    if (readers.size() != 2) continue;
    // The square (Pow(d, 2) or Mul(d, d)) and the normalizing Div(d, .), in either order.
    int sq = -1, div = -1;
    for (int r : readers) {
      const Node& n = g.nodes()[static_cast<size_t>(r)];
      if (IsOp(n, "Pow") && n.inputs.size() == 2 && n.inputs[0] == d) {
        const Tensor* e = ConstValue(g, n.inputs[1]);
        if (e && e->numel() == 1 &&
            ((e->dtype() == DType::kFloat32 && e->data<float>()[0] == 2.f) ||
             (e->dtype() == DType::kInt64 && e->data<int64_t>()[0] == 2)))
          sq = r;
      } else if (IsOp(n, "Mul") && n.inputs.size() == 2 && n.inputs[0] == d && n.inputs[1] == d) {
        sq = r;
      } else if (IsOp(n, "Div") && n.inputs.size() == 2 && n.inputs[0] == d) {
        div = r;
      }
    }
    if (sq < 0 || div < 0) continue;
    nodes.push_back(sq);
    // var = ReduceMean(sq); Add(var, eps); Sqrt; the Div's divisor.
    const int vi = SoleConsumer(g, g.nodes()[static_cast<size_t>(sq)].outputs[0]);
    if (vi < 0 || !MeanOverLastAxis(g, g.nodes()[static_cast<size_t>(vi)])) continue;
    nodes.push_back(vi);
    float eps = 0;
    const int root = EpsSqrt(g, g.nodes()[static_cast<size_t>(vi)].outputs[0], &eps, &nodes);
    if (root < 0) continue;
    const Node& div_n = g.nodes()[static_cast<size_t>(div)];
    if (SoleConsumer(g, root) != div || div_n.inputs[1] != root) continue;
    nodes.push_back(div);
    // Optional scale and shift.
    int out = div_n.outputs[0], gamma = -1, beta = -1;
    const int mul_i = SoleConsumer(g, out);
    if (mul_i >= 0 && (gamma = PerChannelOperand(g, g.nodes()[static_cast<size_t>(mul_i)], "Mul", out, c)) >= 0) {
      nodes.push_back(mul_i);
      out = g.nodes()[static_cast<size_t>(mul_i)].outputs[0];
      const int add_i = SoleConsumer(g, out);
      if (add_i >= 0 && (beta = PerChannelOperand(g, g.nodes()[static_cast<size_t>(add_i)], "Add", out, c)) >= 0) {
        nodes.push_back(add_i);
        out = g.nodes()[static_cast<size_t>(add_i)].outputs[0];
      }
    }
    bool taken = false;
    for (int n : nodes) taken |= dead.count(n) > 0;
    if (taken) continue;
    Node ln;
    ln.name = mean.name + "_layernorm";
    ln.op_type = "LayerNormalization";
    ln.attrs.Set("axis", Attribute::Int(-1));
    ln.attrs.Set("epsilon", Attribute::Float(eps));
    ln.inputs = {x, -1, -1};
    ln.outputs = {out};
    fused.push_back(ln);
    dead.insert(nodes.begin(), nodes.end());
    // Initializers after the node list is final: AddInitializer grows the value table, which the
    // const pointers above point into.
    Node& last_ln = fused.back();
    // Scale and shift as [C] (LayerNormalization broadcasts them over the normalized dims).
    last_ln.inputs[1] = ChannelVector(g, gamma, 1.f, c, ln.name + "_scale");
    last_ln.inputs[2] = ChannelVector(g, beta, 0.f, c, ln.name + "_bias");
  }
  g.RemoveNodes(dead);
  for (Node& n : fused) g.AddNode(std::move(n));
  *count += static_cast<int>(fused.size());
  return Status::Ok();
}

Status FuseRmsNorm(Graph& g, int* count) {
  std::set<int> dead;
  std::vector<Node> fused;
  for (size_t mi = 0; mi < g.nodes().size(); ++mi) {
    const Node& mean = g.nodes()[mi];
    if (dead.count(static_cast<int>(mi)) || !MeanOverLastAxis(g, mean)) continue;
    // The square: Pow(x, 2) or Mul(x, x).
    const Node* sq = Producer(g, mean.inputs[0]);
    if (!sq || sq->outputs.size() != 1 || sq->inputs.size() != 2 || SoleConsumer(g, sq->outputs[0]) != static_cast<int>(mi))
      continue;
    const int x = sq->inputs[0];
    bool square = IsOp(*sq, "Mul") && sq->inputs[1] == x;
    if (IsOp(*sq, "Pow")) {
      const Tensor* e = ConstValue(g, sq->inputs[1]);
      square = e && e->numel() == 1 &&
               ((e->dtype() == DType::kFloat32 && e->data<float>()[0] == 2.f) ||
                (e->dtype() == DType::kInt64 && e->data<int64_t>()[0] == 2));
    }
    if (!square || FloatRank(g, x) < 1) continue;
    const Dim last = g.value(x).shape->back();
    if (!last.known()) continue;
    const int64_t c = last.value;
    std::vector<int> nodes{g.value(mean.inputs[0]).producer, static_cast<int>(mi)};
    float eps = 0;
    const int root = EpsSqrt(g, mean.outputs[0], &eps, &nodes);
    if (root < 0) continue;
    // x / root, or x · (1 / root) with the reciprocal as Reciprocal or Div(1, root).
    const int ri = SoleConsumer(g, root);
    if (ri < 0) continue;
    const Node& r = g.nodes()[static_cast<size_t>(ri)];
    int normed = -1;
    if (IsOp(r, "Div") && r.inputs.size() == 2 && r.inputs[0] == x && r.inputs[1] == root) {
      nodes.push_back(ri);
      normed = r.outputs[0];
    } else {
      bool reciprocal = IsOp(r, "Reciprocal");
      if (IsOp(r, "Div") && r.inputs.size() == 2 && r.inputs[1] == root) {
        const Tensor* one = ConstValue(g, r.inputs[0]);
        reciprocal = one && one->dtype() == DType::kFloat32 && one->numel() == 1 && one->data<float>()[0] == 1.f;
      }
      if (!reciprocal || r.outputs.size() != 1) continue;
      nodes.push_back(ri);
      const int mul_i = SoleConsumer(g, r.outputs[0]);
      if (mul_i < 0) continue;
      const Node& m = g.nodes()[static_cast<size_t>(mul_i)];
      if (!IsOp(m, "Mul") || m.inputs.size() != 2 ||
          !((m.inputs[0] == x && m.inputs[1] == r.outputs[0]) || (m.inputs[1] == x && m.inputs[0] == r.outputs[0])))
        continue;
      nodes.push_back(mul_i);
      normed = m.outputs[0];
    }
    // x may have other readers (the residual); the intermediates may not.
    if (g.IsGraphOutput(normed)) continue;
    bool inner_out = false;
    for (int n : nodes)
      for (int o : g.nodes()[static_cast<size_t>(n)].outputs) inner_out |= o != normed && g.IsGraphOutput(o);
    if (inner_out) continue;
    // The optional scale.
    int out = normed, gamma = -1;
    const int gi = SoleConsumer(g, normed);
    if (gi >= 0 && (gamma = PerChannelOperand(g, g.nodes()[static_cast<size_t>(gi)], "Mul", normed, c)) >= 0) {
      nodes.push_back(gi);
      out = g.nodes()[static_cast<size_t>(gi)].outputs[0];
    }
    bool taken = false;
    for (int n : nodes) taken |= dead.count(n) > 0;
    if (taken) continue;
    Node rms;
    rms.name = mean.name + "_rmsnorm";
    rms.op_type = "RMSNormalization";
    rms.attrs.Set("axis", Attribute::Int(-1));
    rms.attrs.Set("epsilon", Attribute::Float(eps));
    rms.inputs = {x, -1};
    rms.outputs = {out};
    fused.push_back(rms);
    dead.insert(nodes.begin(), nodes.end());
    fused.back().inputs[1] = ChannelVector(g, gamma, 1.f, c, rms.name + "_scale");
  }
  g.RemoveNodes(dead);
  for (Node& n : fused) g.AddNode(std::move(n));
  *count += static_cast<int>(fused.size());
  return Status::Ok();
}

}  // namespace whittle
