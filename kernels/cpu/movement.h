// Fast CPU kernels for the data-movement ops. Same contracts as kernels/reference/movement.h and
// bit-identical results (they only move bytes): contiguous runs are copied with memcpy, axes
// that stay adjacent are merged first, Transpose that moves the innermost axis is done in
// cache-sized tiles (NCHW<->NHWC), and large tensors are split across OpenMP threads.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/common/movement_fns.h"

namespace whittle {

// Below this many output bytes a data-movement kernel stays single-threaded: at batch 1 the
// thread start-up costs more than the copy.
constexpr int64_t kParallelMinBytes = int64_t{1} << 18;

// Runs fn(begin, end) over [0, n) split into one contiguous chunk per thread (or once, inline,
// when !parallel). fn must be thread-safe across disjoint ranges.
template <class Fn>
void ParallelChunks(int64_t n, int threads, bool parallel, Fn fn) {
  if (!parallel || threads <= 1 || n < 2) {
    fn(int64_t{0}, n);
    return;
  }
  const int t = static_cast<int>(std::min<int64_t>(threads, n));
#pragma omp parallel for num_threads(t) schedule(static)
  for (int c = 0; c < t; ++c) fn(n * c / t, n * (c + 1) / t);
}

Status TransposeCpu(const Tensor& in, const std::vector<int64_t>& perm, Tensor* out, int threads);
Status ConcatCpu(const std::vector<const Tensor*>& ins, int64_t axis, Tensor* out, int threads);
Status SplitCpu(const Tensor& in, int64_t axis, const std::vector<Tensor*>& outs, int threads);
Status SliceCpu(const Tensor& in, const SliceParams& p, Tensor* out, int threads);
Status GatherCpu(const Tensor& data, const Tensor& indices, int64_t axis, Tensor* out, int threads);
Status ExpandCpu(const Tensor& in, Tensor* out, int threads);
Status PadCpu(const Tensor& in, const std::vector<int64_t>& pads, PadMode mode, uint64_t value_bits, Tensor* out,
              int threads);

namespace cpu {
// dst[b][c][r] = src[b][r][c] for batch x (rows x cols) float matrices, on up to `threads` threads
// (the Transpose kernel's tiled loop, 8x8 register blocks on AVX2).
void TransposeLast2(const float* src, int64_t batch, int64_t rows, int64_t cols, float* dst, int threads);

// Tile and Range take the reference's (no fast path).
extern const MovementFns kMovementFns;
}  // namespace cpu

}  // namespace whittle
