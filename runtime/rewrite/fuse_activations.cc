#include "runtime/rewrite/fuse_activations.h"

#include <set>
#include <string>

#include "lib/ir/domain.h"
#include "runtime/rewrite/match.h"

namespace whittle {

Status FuseActivations(Graph& g, int* count) {
  static const std::set<std::string> kProducers = {"Conv", "Gemm", "MatMul"};
  static const std::set<std::string> kActs = {"Relu", "LeakyRelu", "Sigmoid", "Tanh", "Clip", "HardSigmoid", "HardSwish"};
  std::set<int> dead;
  for (size_t pi = 0; pi < g.nodes().size(); ++pi) {
    Node& p = g.nodes()[pi];
    // The binarized layers (ai.whittle BinaryMatMul / BinaryConv) take a Relu in their epilogue.
    const bool binary = p.domain == kWhittleDomain && (p.op_type == "BinaryMatMul" || p.op_type == "BinaryConv");
    if (!(binary || (kProducers.count(p.op_type) && p.domain.empty())) || p.attrs.Has("_activation") || p.outputs.empty())
      continue;
    int y = p.outputs[0];
    if (y < 0 || g.value(y).dtype != DType::kFloat32) continue;
    int ai = rewrite::SoleConsumer(g, y);
    if (ai < 0 || dead.count(ai)) continue;
    const Node& a = g.nodes()[static_cast<size_t>(ai)];
    if (!kActs.count(a.op_type) || !a.domain.empty() || a.inputs.empty() || a.inputs[0] != y) continue;
    if (binary && a.op_type != "Relu") continue;
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
          const Tensor* t = rewrite::ConstInput(g, a, i);
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

}  // namespace whittle
