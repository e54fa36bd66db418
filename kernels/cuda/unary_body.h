// The CUDA epilogues' per-element activation (kernels/cuda/elementwise.cu's binary and bias
// kernels and a fused node's separate pass apply it), built from the formulas the element-wise
// ops share (kernels/common/elementwise_ops.h); and the normalization kernels' affine step.
// tests/kernels/cuda_movement_body_test.cc runs them on the CPU against the reference kernels.
#pragma once

#include <cmath>

#include "kernels/cuda/elementwise.h"
#include "kernels/common/elementwise_ops.h"
#include "kernels/cuda/hd.h"

namespace whittle::cuda {

// act(x) for the activations the epilogues apply, by the shared formulas (alpha, beta:
// LeakyRelu's slope, HardSigmoid's alpha and beta, Clip's bounds).
WH_HD float Apply(Unary act, float x, float alpha, float beta = 0.f) {
  using reference::UnaryOp;
  reference::UnaryParams p;
  p.alpha = alpha;
  p.beta = beta;
  switch (act) {
    case Unary::kIdentity: return x;
    case Unary::kRelu: return ew::UnaryValue(UnaryOp::kRelu, p, x);
    case Unary::kLeakyRelu: return ew::UnaryValue(UnaryOp::kLeakyRelu, p, x);
    case Unary::kSigmoid: return ew::Sigmoid(x);
    case Unary::kTanh: return ew::UnaryValue(UnaryOp::kTanh, p, x);
    case Unary::kHardSigmoid: return ew::HardSigmoid(x, alpha, beta);
    case Unary::kHardSwish: return ew::UnaryValue(UnaryOp::kHardSwish, p, x);
    case Unary::kClip: return ew::Lesser(ew::Greater(x, alpha), beta);  // NaN stays NaN (the CPU's min(max(x, lo), hi))
    case Unary::kSilu: return x * ew::Sigmoid(x);  // a fused Sigmoid + Mul
  }
  return x;
}

// The normalization kernels' affine step on a normalised value v of row r, column k: per column
// (LayerNormalization: row_channels 0) or per row's channel (InstanceNormalization over rows of
// [N*C] planes: channel r % row_channels); bias may be null.
WH_HD float NormAffine(float v, const float* scale, const float* bias, int64_t row_channels, int64_t r, int64_t k) {
  const int64_t i = row_channels ? r % row_channels : k;
  return v * scale[i] + (bias ? bias[i] : 0.f);
}

}  // namespace whittle::cuda
