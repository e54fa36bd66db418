// The CUDA quantization family's launchers (device code: kernels/cuda/quant.cu; QuantizeArgs and
// the bodies: kernels/cuda/quant_body.h): QuantizeLinear and DequantizeLinear. Device pointers
// and a stream as void*, no CUDA types (kernels/cuda/elementwise.h says how every launcher
// behaves).
#pragma once

#include <cstdint>

namespace whittle::cuda {

// QuantizeLinear / DequantizeLinear over x [outer, channels, inner] (kernels/cuda/quant_body.h).
struct QuantizeArgs;
void LaunchQuantize(const QuantizeArgs& a, int64_t n, void* stream);
void LaunchDequantize(const QuantizeArgs& a, int64_t n, void* stream);

}  // namespace whittle::cuda
