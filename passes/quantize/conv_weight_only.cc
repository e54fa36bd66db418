#include "passes/quantize/conv_weight_only.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "passes/cost.h"
#include "passes/quantize/opset_upgrade.h"

namespace whittle {

Status QuantizeConvWeightsInt8(Graph& g, const LayerSelection& select, PassReport* rep) {
  std::vector<int> convs;  // match first, then rewrite
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    if (n.op_type != "Conv" || !n.domain.empty()) continue;
    const std::string why = select.LeftAloneReason(n.name);
    const Tensor* w = g.ConstInput(n, 1, DType::kFloat32);
    if (!why.empty() || !w || w->rank() < 3 || w->dim(0) == 0) {
      rep->layers.push_back(SkippedLayer(g, n, !why.empty() ? why : "its weight is not a constant float32 tensor"));
      continue;
    }
    convs.push_back(static_cast<int>(i));
  }
  if (convs.empty()) return Status::Ok();
  WH_RETURN_IF_ERROR(quant::UpgradeOpsetTo13(g, &rep->notes));
  for (int i : convs) {
    const Node node = g.nodes()[static_cast<size_t>(i)];  // a copy: the graph grows below
    const Tensor& w = *g.ConstInput(node, 1, DType::kFloat32);
    const int64_t numel = w.numel(), out = w.dim(0), per = numel / out;
    Tensor q(DType::kInt8, w.dims()), scale(DType::kFloat32, {out});
    const float* src = w.data<float>();
    int8_t* codes = q.data<int8_t>();
    double err = 0, energy = 0;
    for (int64_t o = 0; o < out; ++o) {
      float amax = 0;
      for (int64_t k = 0; k < per; ++k) amax = std::max(amax, std::fabs(src[o * per + k]));
      const float s = amax > 0 ? amax / 127.f : 1.f;
      scale.data<float>()[o] = s;
      for (int64_t k = 0; k < per; ++k) {
        const float x = src[o * per + k];
        const int v = static_cast<int>(std::lround(std::clamp(x / s, -127.f, 127.f)));
        codes[o * per + k] = static_cast<int8_t>(v);
        err += (x - v * s) * static_cast<double>(x - v * s);
        energy += static_cast<double>(x) * x;
      }
    }
    LayerReport lr;
    lr.node = node.name;
    lr.op_type = node.op_type;
    lr.params_before = lr.params_after = NodeParams(g, node);
    lr.macs_before = lr.macs_after = NodeMacs(g, node);
    // `w` points into the graph's values, which the additions below may move.
    const int qid = g.AddInitializer(g.UniqueName(node.name + "/weight_int8"), std::move(q));
    const int sid = g.AddInitializer(g.UniqueName(node.name + "/weight_scale"), std::move(scale));
    // An explicit int8 zero point (all 0) names the code type, as the int8 pass's weights do, so
    // that quantization-aware fine-tuning lifts it to an int8 fake quantizer.
    const int zid = g.AddInitializer(g.UniqueName(node.name + "/weight_zero_point"), Tensor(DType::kInt8, {out}));
    AttributeMap attrs;
    attrs.Set("axis", Attribute::Int(0));
    const int dq = g.AddOp(node.name + "/weight_dequantize", "DequantizeLinear", {qid, sid, zid}, attrs);
    g.nodes()[static_cast<size_t>(i)].inputs[1] = dq;
    char detail[160];
    std::snprintf(detail, sizeof detail, "weights int8 per output channel, activations float: %lld -> ~%lld bytes, "
                  "weight error %.4f (relative)", static_cast<long long>(numel * 4),
                  static_cast<long long>(numel + out * 5), energy > 0 ? std::sqrt(err / energy) : 0.0);
    lr.action = "int8-weights";
    lr.setting = 8;
    lr.detail = detail;
    rep->layers.push_back(lr);
  }
  g.Reindex();
  return g.Compact();
}

}  // namespace whittle
