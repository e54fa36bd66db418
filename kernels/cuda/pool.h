// The CUDA pooling family's launchers (device code: kernels/cuda/pool.cu; bodies:
// kernels/cuda/grad_body.h's pool gradients, quant_body.h's byte max pool): max and average pools,
// GlobalAveragePool, their gradients, and the int8/uint8 max pool. Device pointers, sizes and a
// stream as void*, no CUDA types (kernels/cuda/elementwise.h says how every launcher behaves).
#pragma once

#include <cstdint>

#include "kernels/cuda/window.h"

namespace whittle::cuda {

// Pools over x [n*c, in_h, in_w] -> y [n*c, out_h, out_w]. Average: count_include_pad counts the
// padded taps (inside the padded input) in the divisor.
void LaunchMaxPool2d(const float* x, float* y, int64_t planes, const Window2d& w, void* stream);
void LaunchAveragePool2d(const float* x, float* y, int64_t planes, const Window2d& w, bool count_include_pad,
                         void* stream);
// y[p] = mean of x's plane p (planes of hw).
void LaunchGlobalAveragePool(const float* x, float* y, int64_t planes, int64_t hw, void* stream);

// MaxPoolGrad (max; x read) or AveragePoolGrad over planes of x/dx [in_h, in_w], dy [out_h, out_w].
void LaunchPoolGrad2d(const float* x, const float* dy, float* dx, int64_t planes, const Window2d& w, bool max,
                      bool count_include_pad, void* stream);

// Max pool of uint8 (is_uint8) or int8 planes, like LaunchMaxPool2d.
void LaunchMaxPool2dBytes(const void* x, void* y, bool is_uint8, int64_t planes, const Window2d& w, void* stream);

}  // namespace whittle::cuda
