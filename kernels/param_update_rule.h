// The optimizer's per-element update rules, shared by the CPU loop (kernels/param_update.cc) and
// the CUDA kernel (kernels/cuda/param_update.cu): one definition of SGD and AdamW, so a parameter
// trained on either device follows the same arithmetic. Plain data and WH_HD functions only (no
// CUDA header; kernels/cuda/hd.h).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/cuda/hd.h"

namespace whittle {

// One step's hyper-parameters, the same for every element of one parameter tensor.
struct UpdateHyper {
  bool adamw = false;
  float lr = 0, weight_decay = 0;  // weight_decay 0 for parameters it does not apply to
  float clip = 1;                  // the gradient's scale (global-norm clipping)
  // SGD (PyTorch's: L2 added to the gradient, then momentum; the first step's buffer is the
  // gradient itself).
  float momentum = 0;
  bool nesterov = false, first = false;
  // AdamW (decoupled weight decay); bc1, bc2: the bias corrections 1 - beta^t.
  float beta1 = 0.9f, beta2 = 0.999f, bc1 = 1, bc2 = 1, eps = 1e-8f;
};

// Element i of p updated in place from the gradient g (m: momentum / first moment, v: second moment).
WH_HD void UpdateAt(const UpdateHyper& h, float* p, const float* g, float* m, float* v, int64_t i) {
  if (!h.adamw) {
    const float gi = g[i] * h.clip + h.weight_decay * p[i];
    m[i] = h.first ? gi : h.momentum * m[i] + gi;
    p[i] -= h.lr * (h.nesterov ? gi + h.momentum * m[i] : m[i]);
    return;
  }
  const float gi = g[i] * h.clip;
  p[i] *= 1.f - h.lr * h.weight_decay;
  m[i] = h.beta1 * m[i] + (1.f - h.beta1) * gi;
  v[i] = h.beta2 * v[i] + (1.f - h.beta2) * gi * gi;
  p[i] -= h.lr * (m[i] / h.bc1) / (sqrtf(v[i] / h.bc2) + h.eps);
}

// The squared sum of share `share` of `shares` of g[0, n): elements share, share + shares, ...
// in double. A reduction that adds the shares in index order gets one result for a given
// (n, shares), whatever runs the shares.
WH_HD double SquaresShare(const float* g, int64_t n, int64_t share, int64_t shares) {
  double s = 0;
  for (int64_t i = share; i < n; i += shares) s += static_cast<double>(g[i]) * g[i];
  return s;
}

}  // namespace whittle
