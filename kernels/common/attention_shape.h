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

}  // namespace whittle
