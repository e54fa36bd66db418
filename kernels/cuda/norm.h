// The CUDA normalization family's launchers (device code: kernels/cuda/norm.cu; BatchNormAt:
// kernels/cuda/grad_body.h): LayerNormalization and InstanceNormalization, and inference-form
// BatchNormalization. Device pointers, sizes and a stream as void*, no CUDA types
// (kernels/cuda/elementwise.h says how every launcher behaves).
#pragma once

#include <cstdint>

namespace whittle::cuda {

// LayerNormalization of x [rows, cols] over cols: y = (x - mean) / sqrt(var + eps) * scale + bias
// (scale and bias: cols values; bias may be null), a block per row, mean and variance in float.
// row_channels > 0: InstanceNormalization of [N*C] rows instead, scale and bias per row's channel
// (row % row_channels).
void LaunchLayerNorm(const float* x, const float* scale, const float* bias, float* y, int64_t rows, int64_t cols,
                     float eps, void* stream, int64_t row_channels = 0);

// Inference BatchNormalization of x [N, C, inner] with per-channel scale, bias, mean, var.
void LaunchBatchNorm(const float* x, const float* scale, const float* bias, const float* mean, const float* var,
                     float eps, int64_t n, int64_t channels, int64_t inner, float* y, void* stream);

}  // namespace whittle::cuda
