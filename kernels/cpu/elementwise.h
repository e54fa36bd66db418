// Fast CPU element-wise kernels. Same contracts as kernels/reference/elementwise.h, which they
// fall back to for types and ops without a fast path. Binary ops collapse the broadcast into
// (rows x contiguous inner run) with the inner run being vector-vector, vector-scalar or
// scalar-vector, so same-shape, bias-add ([N,K]+[K]) and per-channel ([N,C,H,W]+[C,1,1]) cases
// are tight vectorisable loops. OpenMP is used only above kParallelMinElements elements.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "kernels/common/elementwise_fns.h"

namespace whittle::cpu {

// Below this many elements a kernel runs on the calling thread (thread start-up costs more).
constexpr int64_t kParallelMinElements = int64_t{1} << 16;

// Calls f(begin, end) over [0, n), split across up to `threads` OpenMP threads when n is large.
template <class F>
void ParallelRange(int64_t n, int threads, F&& f, int64_t min_elements = kParallelMinElements) {
  if (threads <= 1 || n < min_elements) {
    f(int64_t{0}, n);
    return;
  }
  const int64_t chunks = std::min<int64_t>(threads, std::max<int64_t>(1, n / std::max<int64_t>(1, min_elements / 4)));
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t c = 0; c < chunks; ++c) f(n * c / chunks, n * (c + 1) / chunks);
}

Status Binary(reference::BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out, int threads);
Status Variadic(reference::BinaryOp op, bool mean, const std::vector<const Tensor*>& inputs, Tensor& out,
                int threads);
Status Unary(reference::UnaryOp op, const reference::UnaryParams& p, const Tensor& x, Tensor& out, int threads);
Status Clip(const Tensor& x, const Tensor* lo, const Tensor* hi, std::optional<float> lo_attr,
            std::optional<float> hi_attr, Tensor& out, int threads);

// Binary, Unary, Variadic and Clip; Cast and Where take the reference's (they only convert or
// select values, there is nothing to vectorise beyond what the compiler does).
extern const reference::ElementwiseFns kElementwiseFns;

}  // namespace whittle::cpu
