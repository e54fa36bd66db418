// ai.whittle Attention's per-call checks shared by every backend's kernel (lib/ops/attention.cc
// has the op's contract): QKV [B, N, 3*heads*head_dim] and Y [B, N, heads*head_dim].
#pragma once

#include <cstdint>
#include <string>

#include "lib/ir/status.h"
#include "lib/ir/tensor.h"

namespace whittle {

inline Status CheckAttentionQkv(const Tensor& x, const Tensor& y, int64_t heads, int64_t head_dim) {
  if (x.rank() != 3 || x.dim(2) != 3 * heads * head_dim || y.numel() != x.dim(0) * x.dim(1) * heads * head_dim)
    return InvalidArgument("Attention: QKV " + DimsToString(x.dims()) + " does not hold 3 x " + std::to_string(heads) +
                           " heads of " + std::to_string(head_dim));
  return Status::Ok();
}

// The optional scale input: one float32.
inline Status CheckAttentionScale(const Tensor& s) {
  if (s.dtype() != DType::kFloat32 || s.numel() != 1)
    return InvalidArgument("Attention: the scale input must be one float32, got " + DimsToString(s.dims()));
  return Status::Ok();
}

// The optional additive mask (float32, rank <= 4, broadcasting right-aligned to [B, H, N, N]):
// its element strides over those four dims, 0 where it broadcasts.
inline Status AttentionMaskStrides(const Tensor& mask, int64_t b, int64_t h, int64_t n, int64_t strides[4]) {
  const int64_t full[4] = {b, h, n, n};
  if (mask.dtype() != DType::kFloat32 || mask.rank() > 4)
    return InvalidArgument("Attention: the mask must be float32 of rank <= 4, got " + DimsToString(mask.dims()));
  for (int a = 0; a < 4; ++a) strides[a] = 0;
  const int off = 4 - mask.rank();
  int64_t stride = 1;
  for (int a = 3; a >= off; --a) {
    const int64_t md = mask.dim(a - off);
    if (md != 1 && md != full[a])
      return InvalidArgument("Attention: mask " + DimsToString(mask.dims()) + " does not broadcast to [" +
                             std::to_string(b) + ", " + std::to_string(h) + ", " + std::to_string(n) + ", " +
                             std::to_string(n) + "]");
    strides[a] = md == 1 ? 0 : stride;
    stride *= md;
  }
  return Status::Ok();
}

}  // namespace whittle
