// Activation fused into a producer kernel (Conv, Gemm, MatMul). Session::Load folds a single
// consumer activation into the producer by setting internal attributes on the producer node:
//   "_activation": "Relu" | "LeakyRelu" | "Sigmoid" | "Tanh" | "Clip" | "HardSigmoid" | "HardSwish" |
//                  "Silu" (x * Sigmoid(x): the Sigmoid + Mul pair exporters write for SiLU / Swish)
//   "_alpha", "_beta" (LeakyRelu alpha; HardSigmoid alpha/beta), "_min", "_max" (Clip bounds).
// Kernels parse it once at build time and apply it to each output block while it is in cache.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "kernels/common/elementwise_ops.h"
#include "lib/ir/attribute.h"

namespace whittle {

struct FusedActivation {
  enum Kind { kNone, kRelu, kLeakyRelu, kSigmoid, kTanh, kClip, kHardSigmoid, kHardSwish, kSilu } kind = kNone;
  float alpha = 0.01f, beta = 0.5f;
  float min = -std::numeric_limits<float>::infinity();
  float max = std::numeric_limits<float>::infinity();

  static FusedActivation FromAttrs(const AttributeMap& a) {
    FusedActivation f;
    const std::string k = a.GetString("_activation", "");
    if (k == "Relu") f.kind = kRelu;
    else if (k == "LeakyRelu") f.kind = kLeakyRelu;
    else if (k == "Sigmoid") f.kind = kSigmoid;
    else if (k == "Tanh") f.kind = kTanh;
    else if (k == "Clip") f.kind = kClip;
    else if (k == "HardSigmoid") f.kind = kHardSigmoid;
    else if (k == "HardSwish") f.kind = kHardSwish;
    else if (k == "Silu") f.kind = kSilu;
    f.alpha = a.GetFloat("_alpha", f.kind == kHardSigmoid ? 0.2f : 0.01f);
    f.beta = a.GetFloat("_beta", 0.5f);
    f.min = a.GetFloat("_min", f.min);
    f.max = a.GetFloat("_max", f.max);
    return f;
  }

  // The formulas of kernels/common/elementwise_ops.h, each loop with its op a constant.
  void Apply(float* p, int64_t n) const {
    using reference::UnaryOp;
    reference::UnaryParams u;
    u.alpha = alpha;
    u.beta = beta;
    switch (kind) {
      case kNone: return;
      case kRelu: for (int64_t i = 0; i < n; ++i) p[i] = ew::UnaryValue(UnaryOp::kRelu, u, p[i]); return;
      case kLeakyRelu: for (int64_t i = 0; i < n; ++i) p[i] = ew::UnaryValue(UnaryOp::kLeakyRelu, u, p[i]); return;
      case kSigmoid: for (int64_t i = 0; i < n; ++i) p[i] = ew::Sigmoid(p[i]); return;
      case kTanh: for (int64_t i = 0; i < n; ++i) p[i] = std::tanh(p[i]); return;
      case kClip: for (int64_t i = 0; i < n; ++i) p[i] = ew::Lesser(ew::Greater(p[i], min), max); return;
      case kHardSigmoid: for (int64_t i = 0; i < n; ++i) p[i] = ew::HardSigmoid(p[i], alpha, beta); return;
      case kHardSwish: for (int64_t i = 0; i < n; ++i) p[i] = ew::UnaryValue(UnaryOp::kHardSwish, u, p[i]); return;
      case kSilu: for (int64_t i = 0; i < n; ++i) p[i] = p[i] * ew::Sigmoid(p[i]); return;
    }
  }
};

}  // namespace whittle
