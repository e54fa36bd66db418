// The CUDA element-wise kernels' per-element function (kernels/cuda/elementwise.cu's unary, binary
// and epilogue kernels apply it): y = op(x) with the op's attributes alpha (LeakyRelu's slope,
// HardSigmoid's alpha) and beta (HardSigmoid's); and the normalization kernels' affine step.
// tests/kernels/cuda_movement_body_test.cc runs them on the CPU against the reference kernels.
#pragma once

#include <cmath>

#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/hd.h"

namespace whittle::cuda {

WH_HD float HardSigmoidOf(float x, float alpha, float beta) { return fmaxf(0.f, fminf(1.f, alpha * x + beta)); }

WH_HD float Apply(Unary op, float x, float alpha, float beta = 0.f) {
  switch (op) {
    case Unary::kRelu: return x > 0.f ? x : 0.f;
    case Unary::kSigmoid: return 1.f / (1.f + expf(-x));
    case Unary::kTanh: return tanhf(x);
    case Unary::kExp: return expf(x);
    case Unary::kLog: return logf(x);
    case Unary::kNeg: return -x;
    case Unary::kAbs: return fabsf(x);
    case Unary::kSqrt: return sqrtf(x);
    case Unary::kErf: return erff(x);
    case Unary::kLeakyRelu: return x >= 0.f ? x : alpha * x;
    case Unary::kIdentity: return x;
    case Unary::kReciprocal: return 1.f / x;
    case Unary::kGelu: return 0.5f * x * (1.f + erff(x * 0.70710678118654752f));
    case Unary::kGeluTanh: return 0.5f * x * (1.f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
    case Unary::kHardSigmoid: return HardSigmoidOf(x, alpha, beta);
    case Unary::kHardSwish: return x * HardSigmoidOf(x, 1.f / 6.f, 0.5f);
    case Unary::kElu: return x >= 0.f ? x : alpha * expm1f(x);
    case Unary::kSelu: return x > 0.f ? beta * x : beta * (alpha * expf(x) - alpha);  // beta: gamma
    case Unary::kSoftplus: return x > 0.f ? x + log1pf(expf(-x)) : log1pf(expf(x));
    case Unary::kSoftsign: return x / (1.f + fabsf(x));
    case Unary::kFloor: return floorf(x);
    case Unary::kCeil: return ceilf(x);
    case Unary::kRound: return RoundHalfEven(x);
    case Unary::kClip: {  // alpha, beta: the bounds; NaN stays NaN (the CPU's min(max(x, lo), hi))
      const float m = x < alpha ? alpha : x;
      return beta < m ? beta : m;
    }
    case Unary::kThresholdedRelu: return x > alpha ? x : 0.f;
    case Unary::kSilu: return x * (1.f / (1.f + expf(-x)));  // a fused Sigmoid + Mul
  }
  return x;
}

// The binary element-wise ops on one pair (the CPU's semantics: Max/Min keep a NaN first operand,
// Pow in double).
WH_HD float BinaryOf(Binary op, float u, float v) {
  switch (op) {
    case Binary::kAdd: return u + v;
    case Binary::kSub: return u - v;
    case Binary::kMul: return u * v;
    case Binary::kDiv: return u / v;
    case Binary::kPow: return static_cast<float>(pow(static_cast<double>(u), static_cast<double>(v)));
    case Binary::kMax: return (u >= v || u != u) ? u : v;
    case Binary::kMin: return (u <= v || u != u) ? u : v;
    case Binary::kPRelu: return u < 0.f ? u * v : u;
  }
  return u;
}

// The normalization kernels' affine step on a normalised value v of row r, column k: per column
// (LayerNormalization: row_channels 0) or per row's channel (InstanceNormalization over rows of
// [N*C] planes: channel r % row_channels); bias may be null.
WH_HD float NormAffine(float v, const float* scale, const float* bias, int64_t row_channels, int64_t r, int64_t k) {
  const int64_t i = row_channels ? r % row_channels : k;
  return v * scale[i] + (bias ? bias[i] : 0.f);
}

}  // namespace whittle::cuda
