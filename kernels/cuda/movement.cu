// Device drivers of the data-movement ops (launchers: kernels/cuda/movement.h; bodies:
// kernels/cuda/movement_body.h, grad_body.h's StridedCopyAt): one thread per output element,
// elements moved as unsigned words of their size; and the captured upload, its bytes carried in
// the launches' parameters.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/grad_body.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/movement.h"
#include "kernels/cuda/movement_body.h"

namespace whittle::cuda {
namespace {

struct ByteChunk {
  unsigned char b[kWriteBytesChunk];
};

__global__ void WriteBytesKernel(unsigned char* dst, ByteChunk chunk, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) dst[i] = chunk.b[i];
}

template <class T>
__global__ void GatherKernel(const T* x, const int64_t* i64, const int32_t* i32, T* y, int64_t axis_dim, int64_t n_idx,
                             int64_t inner, int64_t n, int64_t* report, int64_t tag, int64_t axis) {
  WH_GRID_STRIDE(i, n) GatherAt(x, i64, i32, y, axis_dim, n_idx, inner, i, report, tag, axis);
}

template <class T>
__global__ void ConcatPieceKernel(const T* x, T* y, int64_t piece_row, int64_t out_row, int64_t offset, int64_t n) {
  WH_GRID_STRIDE(i, n) ConcatPieceAt(x, y, piece_row, out_row, offset, i);
}

__global__ void CastKernel(const void* x, CastType from, void* y, CastType to, int64_t n) {
  WH_GRID_STRIDE(i, n) CastAt(x, from, y, to, i);
}

template <class T>
__global__ void WhereKernel(const uint8_t* c, const T* x, const T* y, T* out, WhereShape s, int64_t n) {
  WH_GRID_STRIDE(i, n) WhereAt(c, x, y, out, s, i);
}

__global__ void StridedCopyKernel(const float* x, float* y, BroadcastShape s, int64_t n) {
  WH_GRID_STRIDE(i, n) StridedCopyAt(x, y, s, i);
}

__global__ void PadKernel(const float* x, float* y, float value, PadGeom g, int64_t n) {
  WH_GRID_STRIDE(i, n) PadAt(x, y, value, g, i);
}

template <class T>
__global__ void FillKernel(T* y, T v, int64_t n) {
  WH_GRID_STRIDE(i, n) y[i] = v;
}

// fn(T{}) with T the unsigned word of elem_bytes.
template <class Fn>
void BySize(int elem_bytes, Fn fn) {
  switch (elem_bytes) {
    case 1: fn(uint8_t{}); break;
    case 2: fn(uint16_t{}); break;
    case 4: fn(uint32_t{}); break;
    case 8: fn(uint64_t{}); break;
    default: break;  // the factories admit these sizes only
  }
}

}  // namespace

void LaunchWriteBytes(void* dst, const void* src, int64_t bytes, void* stream) {
  auto* d = static_cast<unsigned char*>(dst);
  const auto* h = static_cast<const unsigned char*>(src);
  for (int64_t off = 0; off < bytes; off += kWriteBytesChunk) {
    const int n = static_cast<int>(std::min<int64_t>(kWriteBytesChunk, bytes - off));
    ByteChunk c{};
    for (int i = 0; i < n; ++i) c.b[i] = h[off + i];
    WriteBytesKernel<<<1, 256, 0, static_cast<cudaStream_t>(stream)>>>(d + off, c, n);
  }
}

void LaunchStridedCopy(const float* x, float* y, const BroadcastShape& s, int64_t n, void* stream) {
  if (n > 0) StridedCopyKernel<<<Blocks(n), kThreads, 0, S(stream)>>>(x, y, s, n);
}

void LaunchGather(const void* x, const void* idx, bool idx64, void* y, int elem_bytes, int64_t outer, int64_t axis_dim,
                  int64_t n_idx, int64_t inner, const GatherReport& r, void* stream) {
  const int64_t n = outer * n_idx * inner;
  if (n <= 0) return;
  const int64_t* i64 = idx64 ? static_cast<const int64_t*>(idx) : nullptr;
  const int32_t* i32 = idx64 ? nullptr : static_cast<const int32_t*>(idx);
  BySize(elem_bytes, [&](auto t) {
    using T = decltype(t);
    GatherKernel<T><<<Blocks(n), kThreads, 0, S(stream)>>>(static_cast<const T*>(x), i64, i32, static_cast<T*>(y),
                                                           axis_dim, n_idx, inner, n, r.report, r.tag, r.axis);
  });
}

void LaunchConcatPiece(const void* x, void* y, int elem_bytes, int64_t outer, int64_t piece_row, int64_t out_row,
                       int64_t offset, void* stream) {
  const int64_t n = outer * piece_row;
  if (n <= 0) return;
  BySize(elem_bytes, [&](auto t) {
    using T = decltype(t);
    ConcatPieceKernel<T><<<Blocks(n), kThreads, 0, S(stream)>>>(static_cast<const T*>(x), static_cast<T*>(y), piece_row,
                                                                out_row, offset, n);
  });
}

void LaunchCast(const void* x, CastType from, void* y, CastType to, int64_t n, void* stream) {
  if (n > 0) CastKernel<<<Blocks(n), kThreads, 0, S(stream)>>>(x, from, y, to, n);
}

void LaunchWhere(const void* cond, const void* x, const void* y, void* out, int elem_bytes, const WhereShape& s,
                 int64_t n, void* stream) {
  if (n <= 0) return;
  BySize(elem_bytes, [&](auto t) {
    using T = decltype(t);
    WhereKernel<T><<<Blocks(n), kThreads, 0, S(stream)>>>(static_cast<const uint8_t*>(cond), static_cast<const T*>(x),
                                                          static_cast<const T*>(y), static_cast<T*>(out), s, n);
  });
}

void LaunchFill(void* y, int elem_bytes, uint64_t bits, int64_t n, void* stream) {
  if (n <= 0) return;
  BySize(elem_bytes, [&](auto t) {
    using T = decltype(t);
    FillKernel<T><<<Blocks(n), kThreads, 0, S(stream)>>>(static_cast<T*>(y), static_cast<T>(bits), n);
  });
}

void LaunchPad(const float* x, float* y, float value, const PadGeom& g, int64_t n, void* stream) {
  if (n > 0) PadKernel<<<Blocks(n), kThreads, 0, S(stream)>>>(x, y, value, g, n);
}

}  // namespace whittle::cuda
