// The CUDA element-wise kernels' per-element function (kernels/cuda/kernels.cu's unary, binary
// and epilogue kernels apply it): y = op(x) with the op's attributes alpha (LeakyRelu's slope,
// HardSigmoid's alpha) and beta (HardSigmoid's). tests/kernels/cuda_movement_body_test.cc runs it
// on the CPU against the reference kernels.
#pragma once

#include <cmath>

#include "kernels/cuda/hd.h"
#include "kernels/cuda/kernels_impl.h"

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
  }
  return x;
}

}  // namespace whittle::cuda
