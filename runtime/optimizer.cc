#include "runtime/optimizer.h"

#include <cmath>
#include <set>

#include "lib/ops/op_def.h"
#include "runtime/node_runner.h"
#include "runtime/qdq_fusion.h"

namespace whittle {
namespace {

}  // namespace

Status FoldConstants(Graph& g, int* count) {
  WH_ASSIGN_OR_RETURN(std::vector<int> order, g.TopologicalOrder());
  std::set<int> dead;
  for (int ni : order) {
    const Node& n = g.nodes()[static_cast<size_t>(ni)];
    if (!n.domain.empty()) continue;
    std::vector<Tensor> inputs;
    bool all_const = true;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (n.inputs[i] < 0) {
        inputs.emplace_back();
        continue;
      }
      const Tensor* t = g.ConstInput(n, i);
      if (!t) {
        all_const = false;
        break;
      }
      inputs.push_back(*t);
    }
    // Shape of a statically known shape is a constant too.
    if (!all_const && n.op_type == "Shape" && !n.inputs.empty() && n.inputs[0] >= 0) {
      const Value& in = g.value(n.inputs[0]);
      std::optional<Dims> d = in.shape ? ToDims(*in.shape) : std::nullopt;
      if (d && in.dtype != DType::kUndefined && DTypeSize(in.dtype) > 0 && NumElements(*d) <= (1 << 20)) {
        inputs = {Tensor(in.dtype, *d)};
        all_const = true;
      }
    }
    if (!all_const) continue;
    auto out = RunNode(n, static_cast<int>(g.OpsetFor(n.domain)), inputs, Backend::kReference, 1, true);
    if (!out.ok()) return out.status();
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      int o = n.outputs[i];
      if (o < 0) continue;
      Value& v = g.value(o);
      v.initializer = (*out)[i].Clone();  // no aliasing of another constant's buffer
      v.dtype = v.initializer->dtype();
      v.shape = ToSymShape(v.initializer->dims());
    }
    dead.insert(ni);
  }
  g.RemoveNodes(dead);
  *count += static_cast<int>(dead.size());
  return Status::Ok();
}

Status FoldConvBatchNorm(Graph& g, int* count) {
  struct Match {
    int conv, bn;
  };
  std::vector<Match> matches;
  for (size_t bi = 0; bi < g.nodes().size(); ++bi) {
    const Node& bn = g.nodes()[bi];
    if (bn.op_type != "BatchNormalization" || !bn.domain.empty() || bn.inputs.size() < 5) continue;
    if (bn.attrs.GetInt("training_mode", 0) != 0) continue;
    bool extra_outputs = false;
    for (size_t i = 1; i < bn.outputs.size(); ++i) extra_outputs |= bn.outputs[i] >= 0;
    if (extra_outputs) continue;
    int x = bn.inputs[0];
    if (x < 0) continue;
    int ci = g.value(x).producer;
    if (ci < 0) continue;
    const Node& conv = g.nodes()[static_cast<size_t>(ci)];
    if (conv.op_type != "Conv" || !conv.domain.empty() || conv.attrs.Has("_activation")) continue;
    if (g.SoleConsumer(x) != static_cast<int>(bi)) continue;
    const Tensor* w = g.ConstInput(conv, 1);
    if (!w || w->dtype() != DType::kFloat32 || w->rank() < 3) continue;
    if (conv.inputs.size() > 2 && conv.inputs[2] >= 0 && !g.ConstInput(conv, 2)) continue;
    bool stats_const = true;
    for (size_t i = 1; i < 5; ++i) {
      const Tensor* t = g.ConstInput(bn, i);
      stats_const &= t && t->dtype() == DType::kFloat32 && t->numel() == w->dim(0);
    }
    if (!stats_const) continue;
    matches.push_back({ci, static_cast<int>(bi)});
  }
  std::set<int> dead;
  for (const Match& m : matches) {
    Node& conv = g.nodes()[static_cast<size_t>(m.conv)];
    const Node& bn = g.nodes()[static_cast<size_t>(m.bn)];
    const Tensor& w = *g.ConstInput(conv, 1);
    const float* scale = g.ConstInput(bn, 1)->data<float>();
    const float* beta = g.ConstInput(bn, 2)->data<float>();
    const float* mean = g.ConstInput(bn, 3)->data<float>();
    const float* var = g.ConstInput(bn, 4)->data<float>();
    const float eps = bn.attrs.GetFloat("epsilon", 1e-5f);
    const int64_t oc = w.dim(0), per = w.numel() / oc;
    Tensor nw = w.Clone();
    Tensor nb(DType::kFloat32, {oc});
    const Tensor* b = g.ConstInput(conv, 2);
    for (int64_t c = 0; c < oc; ++c) {
      const float s = scale[c] / std::sqrt(var[c] + eps);
      float* wp = nw.data<float>() + c * per;
      for (int64_t k = 0; k < per; ++k) wp[k] *= s;
      const float b0 = b ? b->data<float>()[c] : 0.f;
      nb.data<float>()[c] = (b0 - mean[c]) * s + beta[c];
    }
    int wid = g.AddInitializer(g.UniqueName(g.value(conv.inputs[1]).name + "_bnfold"), std::move(nw));
    int bid = g.AddInitializer(g.UniqueName(conv.name + "_bias_bnfold"), std::move(nb));
    conv.inputs.resize(3, -1);
    conv.inputs[1] = wid;
    conv.inputs[2] = bid;
    conv.outputs[0] = bn.outputs[0];
    dead.insert(m.bn);
  }
  g.RemoveNodes(dead);
  *count += static_cast<int>(dead.size());
  return Status::Ok();
}

Status FuseActivations(Graph& g, int* count) {
  static const std::set<std::string> kProducers = {"Conv", "Gemm", "MatMul"};
  static const std::set<std::string> kActs = {"Relu", "LeakyRelu", "Sigmoid", "Tanh", "Clip", "HardSigmoid", "HardSwish"};
  std::set<int> dead;
  for (size_t pi = 0; pi < g.nodes().size(); ++pi) {
    Node& p = g.nodes()[pi];
    if (!kProducers.count(p.op_type) || !p.domain.empty() || p.attrs.Has("_activation") || p.outputs.empty()) continue;
    int y = p.outputs[0];
    if (y < 0 || g.value(y).dtype != DType::kFloat32) continue;
    int ai = g.SoleConsumer(y);
    if (ai < 0 || dead.count(ai)) continue;
    const Node& a = g.nodes()[static_cast<size_t>(ai)];
    if (!kActs.count(a.op_type) || !a.domain.empty() || a.inputs.empty() || a.inputs[0] != y) continue;
    AttributeMap fused;
    fused.Set("_activation", Attribute::String(a.op_type));
    if (a.op_type == "LeakyRelu") fused.Set("_alpha", Attribute::Float(a.attrs.GetFloat("alpha", 0.01f)));
    if (a.op_type == "HardSigmoid") {
      fused.Set("_alpha", Attribute::Float(a.attrs.GetFloat("alpha", 0.2f)));
      fused.Set("_beta", Attribute::Float(a.attrs.GetFloat("beta", 0.5f)));
    }
    if (a.op_type == "Clip") {
      if (g.OpsetFor("") < 11) {
        if (a.attrs.Has("min")) fused.Set("_min", Attribute::Float(a.attrs.GetFloat("min", 0)));
        if (a.attrs.Has("max")) fused.Set("_max", Attribute::Float(a.attrs.GetFloat("max", 0)));
      } else {
        bool ok = true;
        for (size_t i = 1; i < a.inputs.size() && i < 3; ++i) {
          if (a.inputs[i] < 0) continue;
          const Tensor* t = g.ConstInput(a, i);
          if (!t || t->dtype() != DType::kFloat32 || t->numel() != 1) {
            ok = false;
            break;
          }
          fused.Set(i == 1 ? "_min" : "_max", Attribute::Float(t->data<float>()[0]));
        }
        if (!ok) continue;
      }
    }
    for (const auto& [k, v] : fused.all()) p.attrs.Set(k, v);
    p.outputs[0] = a.outputs[0];
    dead.insert(ai);
  }
  g.RemoveNodes(dead);
  *count += static_cast<int>(dead.size());
  return Status::Ok();
}

StatusOr<OptimizeReport> OptimizeForRuntime(Graph& g) {
  OptimizeReport r;
  // Before folding: FoldConstants would turn DequantizeLinear(int8 weight) into a float weight
  // and the int8 pattern would be lost.
  QdqFusionCounts q;
  WH_RETURN_IF_ERROR(FuseQdq(g, &q));
  r.fused_qdq = q.fused;
  r.int8_passthrough = q.passthrough;
  if (q.fused + q.passthrough > 0) {
    // Drop the Dequantize nodes nobody reads any more before folding would evaluate them.
    WH_RETURN_IF_ERROR(g.Compact());
    WH_RETURN_IF_ERROR(InferShapes(g));
  }
  WH_RETURN_IF_ERROR(FoldConstants(g, &r.folded_constants));
  WH_RETURN_IF_ERROR(FoldConvBatchNorm(g, &r.folded_batchnorms));
  WH_RETURN_IF_ERROR(FuseActivations(g, &r.fused_activations));
  WH_RETURN_IF_ERROR(g.Compact());
  WH_RETURN_IF_ERROR(g.Verify());
  WH_RETURN_IF_ERROR(InferShapes(g));
  return r;
}

}  // namespace whittle
