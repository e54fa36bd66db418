#include "passes/quantize/equalize.h"

#include <algorithm>
#include <cmath>
#include <optional>

namespace whittle::quant {
namespace {

bool IsLinearLayer(const Node& n) { return n.domain.empty() && (n.op_type == "Conv" || n.op_type == "Gemm" || n.op_type == "MatMul"); }

// Flat indices of weight W's elements that belong to output channel c (layer1) or input channel
// c (layer2), by visiting a callback.
template <class F>
void ForOutputChannel(const Node& n, const Tensor& w, int64_t c, F&& f) {
  if (n.op_type == "Conv" || (n.op_type == "Gemm" && n.attrs.GetInt("transB", 0) != 0)) {
    const int64_t per = w.numel() / w.dim(0);
    for (int64_t k = 0; k < per; ++k) f(c * per + k);
  } else {  // [K, N]: column c
    for (int64_t r = 0; r < w.dim(0); ++r) f(r * w.dim(1) + c);
  }
}

template <class F>
void ForInputChannel(const Node& n, const Tensor& w, int64_t c, F&& f) {
  if (n.op_type == "Conv") {  // [M, C, k...]
    const int64_t C = w.dim(1), taps = w.numel() / (w.dim(0) * C);
    for (int64_t m = 0; m < w.dim(0); ++m)
      for (int64_t t = 0; t < taps; ++t) f((m * C + c) * taps + t);
  } else if (n.op_type == "Gemm" && n.attrs.GetInt("transB", 0) != 0) {  // [N, K]: column c
    for (int64_t r = 0; r < w.dim(0); ++r) f(r * w.dim(1) + c);
  } else {  // [K, N]: row c
    for (int64_t k = 0; k < w.dim(1); ++k) f(c * w.dim(1) + k);
  }
}

int64_t OutputChannels(const Node& n, const Tensor& w) {
  if (n.op_type == "Conv" || (n.op_type == "Gemm" && n.attrs.GetInt("transB", 0) != 0)) return w.dim(0);
  return w.rank() == 2 ? w.dim(1) : -1;
}

int64_t InputChannels(const Node& n, const Tensor& w) {
  if (n.op_type == "Conv") return n.attrs.GetInt("group", 1) == 1 ? w.dim(1) : -1;
  if (n.op_type == "Gemm" && n.attrs.GetInt("transB", 0) != 0) return w.dim(1);
  return w.rank() == 2 ? w.dim(0) : -1;
}

}  // namespace

std::vector<std::string> EqualizeChains(Graph& g) {
  std::vector<std::string> done;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& l1 = g.nodes()[i];
    if (!IsLinearLayer(l1) || l1.outputs.empty() || l1.outputs[0] < 0) continue;
    if (l1.op_type == "Gemm" && l1.attrs.GetFloat("alpha", 1.f) != 1.f) continue;
    const Tensor* w1 = g.ConstInput(l1, 1, DType::kFloat32);
    if (!w1 || g.Consumers(l1.inputs[1]).size() != 1) continue;
    // The chain: l1 -> [Relu | MaxPool]* -> l2 (both commute with a positive per-channel scale),
    // each value read only by the next.
    int v = l1.outputs[0];
    if (g.IsGraphOutput(v) || g.Consumers(v).size() != 1) continue;
    int next = g.Consumers(v)[0];
    bool broken = false;
    while (g.nodes()[static_cast<size_t>(next)].op_type == "Relu" || g.nodes()[static_cast<size_t>(next)].op_type == "MaxPool") {
      const Node& mid = g.nodes()[static_cast<size_t>(next)];
      v = mid.outputs[0];
      if (v < 0 || g.IsGraphOutput(v) || g.Consumers(v).size() != 1 || (mid.outputs.size() > 1 && mid.outputs[1] >= 0)) {
        broken = true;
        break;
      }
      next = g.Consumers(v)[0];
    }
    if (broken) continue;
    const Node& l2 = g.nodes()[static_cast<size_t>(next)];
    if (!IsLinearLayer(l2) || l2.inputs.empty() || l2.inputs[0] != v) continue;
    const Tensor* w2 = g.ConstInput(l2, 1, DType::kFloat32);
    if (!w2 || g.Consumers(l2.inputs[1]).size() != 1) continue;
    const int64_t ch = OutputChannels(l1, *w1);
    if (ch <= 0 || InputChannels(l2, *w2) != ch) continue;
    const Tensor* b1 = g.ConstInput(l1, 2, DType::kFloat32);
    if (b1 && (b1->numel() != ch || g.Consumers(l1.inputs[2]).size() != 1)) continue;
    // MatMul/Gemm chains must keep the channel axis last between them (no reshapes), which
    // "read only by the next layer" already guarantees.
    Tensor nw1 = w1->Clone(), nw2 = w2->Clone();
    std::optional<Tensor> nb1;
    if (b1) nb1 = b1->Clone();
    for (int64_t c = 0; c < ch; ++c) {
      double r1 = 0, r2 = 0;
      ForOutputChannel(l1, *w1, c, [&](int64_t k) { r1 = std::max(r1, std::fabs(static_cast<double>(w1->data<float>()[k]))); });
      ForInputChannel(l2, *w2, c, [&](int64_t k) { r2 = std::max(r2, std::fabs(static_cast<double>(w2->data<float>()[k]))); });
      if (r1 <= 0 || r2 <= 0) continue;
      const double s = std::sqrt(r1 / r2);
      ForOutputChannel(l1, *w1, c, [&](int64_t k) { nw1.data<float>()[k] = static_cast<float>(w1->data<float>()[k] / s); });
      ForInputChannel(l2, *w2, c, [&](int64_t k) { nw2.data<float>()[k] = static_cast<float>(w2->data<float>()[k] * s); });
      if (nb1) nb1->data<float>()[c] = static_cast<float>(b1->data<float>()[c] / s);
    }
    const std::string desc = l1.name + " -> " + l2.name;
    g.value(l1.inputs[1]).initializer = std::move(nw1);
    g.value(l2.inputs[1]).initializer = std::move(nw2);
    if (nb1) g.value(g.nodes()[i].inputs[2]).initializer = std::move(*nb1);
    done.push_back(desc);
  }
  return done;
}

}  // namespace whittle::quant
