// The CUDA Resize launcher (device code: kernels/cuda/resize.cu; the geometry tables:
// kernels/cuda/resize_body.h, resize_tables.h). Device pointers, sizes and a stream as void*,
// no CUDA types (kernels/cuda/elementwise.h says how every launcher behaves).
#pragma once

#include <cstdint>

namespace whittle::cuda {

// Resize of float x into y's n elements by the tables in g (kernels/cuda/resize_body.h; device
// pointers).
struct ResizeGeom;
void LaunchResize(const float* x, float* y, const ResizeGeom& g, int64_t n, void* stream);

}  // namespace whittle::cuda
