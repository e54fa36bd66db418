// The CUDA softmax's per-element input (kernels/cuda/softmax.cu's SoftmaxKernel, a warp per row):
// scale * x plus, for the fused Attention, the additive mask broadcast over the rows of a chunk of
// scores. Rows come in groups of `rows_per_group` (one batch entry's N query rows of one head);
// mask element (r, k) sits at p[(r / rows_per_group) * s_group + (r % rows_per_group) * s_row +
// k * s_col]. tests/kernels/attention_kernel_test.cc runs the Attention it serves on the CPU.
#pragma once

#include <cstdint>

#include "kernels/cuda/hd.h"

namespace whittle::cuda {

struct SoftmaxMask {
  const float* p = nullptr;  // null: no mask
  int64_t rows_per_group = 1, s_group = 0, s_row = 0, s_col = 0;
};

WH_HD float SoftmaxInput(const float* x, float c, const SoftmaxMask& m, int64_t cols, int64_t r, int64_t k) {
  const float v = c * x[r * cols + k];
  if (!m.p) return v;
  return v + m.p[(r / m.rows_per_group) * m.s_group + (r % m.rows_per_group) * m.s_row + k * m.s_col];
}

}  // namespace whittle::cuda
