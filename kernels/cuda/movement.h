// The CUDA data-movement family's launchers (device code: kernels/cuda/movement.cu; bodies:
// kernels/cuda/movement_body.h, grad_body.h's StridedCopyAt): Gather, Concat, fill, Pad, Cast,
// Where, the strided copy behind Expand and Transpose, and the small captured upload. elem_bytes
// 1, 2, 4 or 8. Device pointers, sizes and a stream as void*, no CUDA types
// (kernels/cuda/elementwise.h says how every launcher behaves).
#pragma once

#include <cstdint>

#include "kernels/cuda/elementwise.h"

namespace whittle::cuda {

// dst[0, bytes) = the host bytes at src, carried in the launches' parameters (kWriteBytesChunk
// per launch), not read from host memory when they run: how a graph capture records a small
// upload (kernels/cuda/runtime.cc), which then replays with the bytes it was captured with.
constexpr int kWriteBytesChunk = 1024;
void LaunchWriteBytes(void* dst, const void* src, int64_t bytes, void* stream);

// y [s.dims] read from x at s.a_strides (Expand: 0 along broadcast dims; Transpose: permuted).
void LaunchStridedCopy(const float* x, float* y, const BroadcastShape& s, int64_t n, void* stream);

// y [outer, n_idx, inner] = x [outer, axis_dim, inner] gathered at idx (int64, or int32 when
// !idx64; negative ones count from the end) along the middle axis; an index out of range gives
// zeros and, with a report (kernels/kernel.h's device check report), is reported there under tag
// as (index, position, axis, axis_dim).
struct GatherReport {
  int64_t* report = nullptr;
  int64_t tag = 0, axis = 0;
};
void LaunchGather(const void* x, const void* idx, bool idx64, void* y, int elem_bytes, int64_t outer, int64_t axis_dim,
                  int64_t n_idx, int64_t inner, const GatherReport& r, void* stream);
// One Concat input x [outer, piece_row] into y's rows of out_row elements, at element `offset`.
void LaunchConcatPiece(const void* x, void* y, int elem_bytes, int64_t outer, int64_t piece_row, int64_t out_row,
                       int64_t offset, void* stream);
// y[0..n) = the element whose bytes are the low elem_bytes bytes of bits.
void LaunchFill(void* y, int elem_bytes, uint64_t bits, int64_t n, void* stream);
// Pad of float x into y's n elements by g's tables (kernels/cuda/movement_body.h; device memory).
struct PadGeom;
void LaunchPad(const float* x, float* y, float value, const PadGeom& g, int64_t n, void* stream);
enum class CastType : int;
void LaunchCast(const void* x, CastType from, void* y, CastType to, int64_t n, void* stream);
struct WhereShape;
void LaunchWhere(const void* cond, const void* x, const void* y, void* out, int elem_bytes, const WhereShape& s,
                 int64_t n, void* stream);

}  // namespace whittle::cuda
