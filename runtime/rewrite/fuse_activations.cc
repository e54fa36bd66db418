#include "runtime/rewrite/fuse_activations.h"

#include <cmath>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "lib/ir/domain.h"
#include "runtime/rewrite/match.h"

namespace whittle {

namespace {

// Whether y's only readers are a gate s = Sigmoid(y) (SiLU) or HardSigmoid(y) with alpha 1/6 and
// beta 1/2 (HardSwish, as Paddle2ONNX writes it) and a Mul of y and s (either order), s read by
// that Mul alone, neither a graph output: *si, *mi their node indices, *act the activation.
bool GatedPair(const Graph& g, int y, const std::set<int>& dead, int* si, int* mi, std::string* act) {
  if (g.IsGraphOutput(y)) return false;
  const std::vector<int> readers = g.Consumers(y);
  if (readers.size() != 2) return false;
  for (int k = 0; k < 2; ++k) {
    const int s = readers[static_cast<size_t>(k)], m = readers[static_cast<size_t>(1 - k)];
    const Node& sn = g.nodes()[static_cast<size_t>(s)];
    const Node& mn = g.nodes()[static_cast<size_t>(m)];
    const bool hard_swish = sn.op_type == "HardSigmoid" &&
                            std::fabs(sn.attrs.GetFloat("alpha", 0.2f) - 1.f / 6.f) < 1e-6f &&
                            sn.attrs.GetFloat("beta", 0.5f) == 0.5f;
    if (dead.count(s) || dead.count(m) || !(sn.op_type == "Sigmoid" || hard_swish) || !sn.domain.empty() ||
        sn.inputs.size() != 1 || sn.outputs.size() != 1 || mn.op_type != "Mul" || !mn.domain.empty() ||
        mn.inputs.size() != 2 || mn.outputs.size() != 1)
      continue;
    const int sv = sn.outputs[0];
    const bool pair = (mn.inputs[0] == y && mn.inputs[1] == sv) || (mn.inputs[0] == sv && mn.inputs[1] == y);
    if (!pair || g.IsGraphOutput(sv) || rewrite::SoleConsumer(g, sv) != m) continue;
    *si = s;
    *mi = m;
    *act = hard_swish ? "HardSwish" : "Silu";
    return true;
  }
  return false;
}

// The float32 scalar constant operand of a two-input node whose other operand is `x`, or nullopt.
std::optional<float> ScalarWith(const Graph& g, const Node& n, int x) {
  if (n.inputs.size() != 2 || n.outputs.size() != 1 || !n.domain.empty()) return std::nullopt;
  const int slot = n.inputs[0] == x ? 1 : n.inputs[1] == x ? 0 : -1;
  if (slot < 0) return std::nullopt;
  const Tensor* k = rewrite::ConstInput(g, n, static_cast<size_t>(slot));
  if (!k || k->dtype() != DType::kFloat32 || k->numel() != 1 || (slot == 0 && n.op_type == "Div")) return std::nullopt;
  return k->data<float>()[0];
}

// HardSwish as Paddle2ONNX writes it: y read by Add(y, 3) -> Clip(0, 6) and by Mul(y, clipped),
// then Div(·, 6) or Mul(·, 1/6); every intermediate read once and not a graph output. *nodes gets
// the four node indices, *out the last one's output.
bool PaddleHardSwish(const Graph& g, int y, const std::set<int>& dead, std::vector<int>* nodes, int* out) {
  if (g.IsGraphOutput(y)) return false;
  const std::vector<int> readers = g.Consumers(y);
  if (readers.size() != 2) return false;
  for (int k = 0; k < 2; ++k) {
    const int ai = readers[static_cast<size_t>(k)], mi = readers[static_cast<size_t>(1 - k)];
    const Node& a = g.nodes()[static_cast<size_t>(ai)];
    const Node& m = g.nodes()[static_cast<size_t>(mi)];
    if (dead.count(ai) || dead.count(mi) || a.op_type != "Add" || m.op_type != "Mul") continue;
    if (ScalarWith(g, a, y) != 3.f) continue;
    const int ci = rewrite::SoleConsumer(g, a.outputs[0]);
    if (ci < 0 || g.IsGraphOutput(a.outputs[0]) || dead.count(ci)) continue;
    const Node& c = g.nodes()[static_cast<size_t>(ci)];
    if (!rewrite::IsOp(c, "Clip") || c.inputs.empty() || c.inputs[0] != a.outputs[0] || c.outputs.size() != 1) continue;
    const std::optional<rewrite::ClipRange> r = rewrite::ConstClipRange(g, c);
    if (!r || r->min != 0.f || r->max != 6.f) continue;
    const bool pair = (m.inputs[0] == y && m.inputs[1] == c.outputs[0]) || (m.inputs[1] == y && m.inputs[0] == c.outputs[0]);
    if (!pair || m.outputs.size() != 1 || g.IsGraphOutput(c.outputs[0]) || rewrite::SoleConsumer(g, c.outputs[0]) != mi)
      continue;
    const int di = rewrite::SoleConsumer(g, m.outputs[0]);
    if (di < 0 || g.IsGraphOutput(m.outputs[0]) || dead.count(di)) continue;
    const Node& d = g.nodes()[static_cast<size_t>(di)];
    const std::optional<float> by = ScalarWith(g, d, m.outputs[0]);
    const bool sixth = (d.op_type == "Div" && by == 6.f) || (d.op_type == "Mul" && by && std::fabs(*by - 1.f / 6.f) < 1e-7f);
    if (!sixth) continue;
    *nodes = {ai, ci, mi, di};
    *out = d.outputs[0];
    return true;
  }
  return false;
}

}  // namespace

Status FuseActivations(Graph& g, int* count) {
  static const std::set<std::string> kProducers = {"Conv", "Gemm", "MatMul"};
  static const std::set<std::string> kActs = {"Relu", "LeakyRelu", "Sigmoid", "Tanh", "Clip", "HardSigmoid", "HardSwish"};
  std::set<int> dead;
  int fusions = 0;
  for (size_t pi = 0; pi < g.nodes().size(); ++pi) {
    Node& p = g.nodes()[pi];
    // The binarized layers (ai.whittle BinaryMatMul / BinaryConv) take a Relu in their epilogue.
    const bool binary = p.domain == kWhittleDomain && (p.op_type == "BinaryMatMul" || p.op_type == "BinaryConv");
    if (!(binary || (kProducers.count(p.op_type) && p.domain.empty())) || p.attrs.Has("_activation") || p.outputs.empty())
      continue;
    int y = p.outputs[0];
    if (y < 0 || g.value(y).dtype != DType::kFloat32) continue;
    int ai = rewrite::SoleConsumer(g, y);
    if (ai < 0) {
      // SiLU (HardSwish) as exporters write it: y read by a Sigmoid (HardSigmoid) and by a Mul of y
      // with it.
      int mi = -1;
      std::string act;
      std::vector<int> hard_swish;
      int out = -1;
      if (GatedPair(g, y, dead, &ai, &mi, &act)) {
        p.attrs.Set("_activation", Attribute::String(act));
        p.outputs[0] = g.nodes()[static_cast<size_t>(mi)].outputs[0];
        dead.insert(ai);
        dead.insert(mi);
        ++fusions;
      } else if (!binary && PaddleHardSwish(g, y, dead, &hard_swish, &out)) {
        p.attrs.Set("_activation", Attribute::String("HardSwish"));
        p.outputs[0] = out;
        dead.insert(hard_swish.begin(), hard_swish.end());
        ++fusions;
      }
      continue;
    }
    if (dead.count(ai)) continue;
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
      const std::optional<rewrite::ClipRange> r = rewrite::ConstClipRange(g, a);
      if (!r) continue;
      rewrite::SetClipBounds(fused, *r);
    }
    for (const auto& [k, v] : fused.all()) p.attrs.Set(k, v);
    p.outputs[0] = a.outputs[0];
    dead.insert(ai);
    ++fusions;
  }
  *count += fusions;
  g.RemoveNodes(dead);
  return Status::Ok();
}

}  // namespace whittle
