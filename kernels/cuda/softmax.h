// The CUDA Softmax family's launcher (device code: kernels/cuda/softmax.cu; the per-element input
// and the fused Attention's mask: kernels/cuda/softmax_body.h). Device pointers, sizes and a
// stream as void*, no CUDA types (kernels/cuda/elementwise.h says how every launcher behaves).
#pragma once

#include <cstdint>

namespace whittle::cuda {

// Softmax (or LogSoftmax) over the last axis of scale * x [rows, cols] (+ mask, the fused
// Attention's additive mask: kernels/cuda/softmax_body.h); scale: one float in device memory, or
// null for 1; mask null for none.
struct SoftmaxMask;
void LaunchSoftmax(const float* x, float* y, int64_t rows, int64_t cols, bool log, void* stream,
                   const float* scale = nullptr, const SoftmaxMask* mask = nullptr);

}  // namespace whittle::cuda
