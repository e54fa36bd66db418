// Device code of the CUDA pooling family (launchers: kernels/cuda/pool.h): the float max and average
// pools and GlobalAveragePool (a warp per plane), the pool gradients (kernels/cuda/grad_body.h) and
// the int8/uint8 max pool (kernels/cuda/quant_body.h's MaxPoolBytesAt), one thread per output
// element.
#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>

#include "kernels/cuda/grad_body.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/pool.h"
#include "kernels/cuda/quant_body.h"

namespace whittle::cuda {
namespace {

template <class I>
__global__ void PoolKernel(const float* x, float* y, int64_t planes, Window2d w, int mode, bool count_include_pad) {
  const I n = static_cast<I>(planes * w.out_h * w.out_w), out_w = static_cast<I>(w.out_w), out_h = static_cast<I>(w.out_h);
  for (I i = static_cast<I>(blockIdx.x * blockDim.x + threadIdx.x); i < n; i += static_cast<I>(blockDim.x * gridDim.x)) {
    const I q = i / out_w, ow = i - q * out_w, p = q / out_h, oh = q - p * out_h;
    const float* xp = x + p * w.in_h * w.in_w;
    float acc = mode == 0 ? -FLT_MAX : 0.f;
    int64_t count = 0;
    for (int64_t kh = 0; kh < w.k_h; ++kh)
      for (int64_t kw = 0; kw < w.k_w; ++kw) {
        const int64_t ih = oh * w.stride_h - w.pad_top + kh * w.dil_h, iw = ow * w.stride_w - w.pad_left + kw * w.dil_w;
        const bool inside = ih >= 0 && ih < w.in_h && iw >= 0 && iw < w.in_w;
        if (mode == 0) {
          if (inside) acc = fmaxf(acc, xp[ih * w.in_w + iw]);
        } else if (inside) {
          acc += xp[ih * w.in_w + iw];
          ++count;
        } else if (count_include_pad && ih < w.in_h + w.pad_bottom && iw < w.in_w + w.pad_right) {
          ++count;  // a padded tap (not one past the padded input, which ceil_mode can reach)
        }
      }
    y[i] = mode == 0 ? acc : (count ? acc / static_cast<float>(count) : 0.f);
  }
}

__global__ void GlobalAveragePoolKernel(const float* x, float* y, int64_t planes, int64_t hw) {
  const int64_t p = blockIdx.x * static_cast<int64_t>(blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (p >= planes) return;
  float s = 0.f;
  for (int64_t k = lane; k < hw; k += 32) s += x[p * hw + k];
  for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (lane == 0) y[p] = s / static_cast<float>(hw);
}

__global__ void PoolGradKernel(const float* x, const float* dy, float* dx, Window2d w, int mode, bool include_pad,
                               int64_t n) {
  WH_GRID_STRIDE(i, n) PoolGradAt(x, dy, dx, w, mode, include_pad, i);
}

template <class T>
__global__ void MaxPoolBytesKernel(const T* x, T* y, Window2d w, int64_t n) {
  WH_GRID_STRIDE(i, n) MaxPoolBytesAt<T, int64_t>(x, y, w, i);
}

template <class T>
__global__ void MaxPoolBytesKernel32(const T* x, T* y, Window2d w, int32_t n) {
  for (int32_t i = static_cast<int32_t>(blockIdx.x * blockDim.x + threadIdx.x); i < n;
       i += static_cast<int32_t>(blockDim.x * gridDim.x))
    MaxPoolBytesAt<T, int32_t>(x, y, w, i);
}

}  // namespace

// mode 0: max, 1: average.
void LaunchPool(const float* x, float* y, int64_t planes, const Window2d& w, int mode, bool count_include_pad,
                void* stream) {
  const int64_t n = planes * w.out_h * w.out_w;
  if (n <= 0) return;
  if (Fits32(n)) PoolKernel<int32_t><<<Blocks(n), kThreads, 0, S(stream)>>>(x, y, planes, w, mode, count_include_pad);
  else PoolKernel<int64_t><<<Blocks(n), kThreads, 0, S(stream)>>>(x, y, planes, w, mode, count_include_pad);
}

void LaunchMaxPool2d(const float* x, float* y, int64_t planes, const Window2d& w, void* stream) {
  LaunchPool(x, y, planes, w, 0, false, stream);
}

void LaunchAveragePool2d(const float* x, float* y, int64_t planes, const Window2d& w, bool count_include_pad,
                         void* stream) {
  LaunchPool(x, y, planes, w, 1, count_include_pad, stream);
}

void LaunchGlobalAveragePool(const float* x, float* y, int64_t planes, int64_t hw, void* stream) {
  const int64_t per_block = kThreads / 32;
  if (planes > 0) GlobalAveragePoolKernel<<<static_cast<unsigned>((planes + per_block - 1) / per_block), kThreads, 0, S(stream)>>>(x, y, planes, hw);
}

void LaunchPoolGrad2d(const float* x, const float* dy, float* dx, int64_t planes, const Window2d& w, bool max,
                      bool count_include_pad, void* stream) {
  const int64_t n = planes * w.in_h * w.in_w;
  if (n > 0) PoolGradKernel<<<Blocks(n), kThreads, 0, S(stream)>>>(x, dy, dx, w, max ? 0 : 1, count_include_pad, n);
}

void LaunchMaxPool2dBytes(const void* x, void* y, bool is_uint8, int64_t planes, const Window2d& w, void* stream) {
  const int64_t n = planes * w.out_h * w.out_w;
  if (n <= 0) return;
  const auto* xu = static_cast<const uint8_t*>(x);
  const auto* xs = static_cast<const int8_t*>(x);
  auto* yu = static_cast<uint8_t*>(y);
  auto* ys = static_cast<int8_t*>(y);
  const int32_t n32 = static_cast<int32_t>(n);
  if (Fits32(n) && is_uint8) MaxPoolBytesKernel32<<<Blocks(n), kThreads, 0, S(stream)>>>(xu, yu, w, n32);
  else if (Fits32(n)) MaxPoolBytesKernel32<<<Blocks(n), kThreads, 0, S(stream)>>>(xs, ys, w, n32);
  else if (is_uint8) MaxPoolBytesKernel<<<Blocks(n), kThreads, 0, S(stream)>>>(xu, yu, w, n);
  else MaxPoolBytesKernel<<<Blocks(n), kThreads, 0, S(stream)>>>(xs, ys, w, n);
}

}  // namespace whittle::cuda
