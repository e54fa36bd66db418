// Fast int8 GEMM for the integer linear kernels, bit-exact with kernels/reference/qlinear.h.
// Both operands are packed as int16 (value - zero point): A row-major with K padded to even, B in
// panels of kQNr columns with k in pairs, so the AVX2 micro-kernel multiplies a broadcast
// (a[i,k], a[i,k+1]) pair by a B panel row with vpmaddwd, which is exact here
// (|products| <= 255 * 255, pair sums fit int32; vpmaddubsw would saturate). The epilogue (bias,
// float multiplier, round-half-even, zero point, saturation, Relu) is fused into the store.
// Without AVX2 at compile time a portable scalar micro-kernel runs instead (same results).
// oneDNN's int8 GEMM is an alternative accumulator backend (benchmarks, WHITTLE_QGEMM=onednn).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/reference/qlinear.h"

namespace whittle {

constexpr int64_t kQMr = 6;   // rows per A panel / micro-tile
constexpr int64_t kQNr = 16;  // columns per B panel / micro-tile

struct QPackedA {
  int64_t M = 0, K = 0, Kp = 0;  // Kp: K rounded up to even
  std::vector<int16_t> data;     // [M rounded up to kQMr][Kp], padding 0
};
struct QPackedB {
  int64_t K = 0, N = 0, Kp = 0;
  std::vector<int16_t> data;  // [ceil(N/kQNr)][Kp/2][kQNr][2]
};

// a: M x K (zero point per row, 1 or M values); b: K x N (zero point per column, 1 or N values).
void QPackA(const QMatrix& a, int64_t M, int64_t K, QPackedA* out, int threads = 1);
void QPackB(const QMatrix& b, int64_t K, int64_t N, QPackedB* out, int threads = 1);
// B = im2col of group `group` of one image x_image ([C, D...]) as K = C/group * taps rows by the
// output positions; taps in the padding are x_zp (so they pack as 0).
void QPackIm2Col(const ConvShape& s, const void* x_image, DType x_dtype, int32_t x_zp, int64_t group,
                 QPackedB* out);

// Stride-1 2-D convolutions skip the im2col copy: with the input planes zero-padded (int16,
// x - x_zp) and the output computed at the padded row pitch Wp, every im2col row is a contiguous
// slice of a plane, interleaved straight into the panels. B then has OH * Wp columns, of which
// those with ow >= OW are garbage for QCompactConvRows to drop.
bool QConvUsesPaddedPlanes(const ConvShape& s);
// planes: scratch reused across calls. out->N = OH * Wp (returned as *pitch = Wp).
void QPackConvPadded(const ConvShape& s, const void* x_image, DType x_dtype, int32_t x_zp, int64_t group,
                     std::vector<int16_t>* planes, QPackedB* out, int64_t* pitch);
// y[m, oh, ow] = tmp[m, oh * pitch + ow] for rows m < rows, elements of elem_size bytes.
void QCompactConvRows(const void* tmp, int64_t rows, int64_t oh, int64_t ow, int64_t pitch, size_t elem_size, void* y);

// y = epilogue(A * B): rows x cols = a.M x b.N written at y with row stride ldy elements of
// out.dtype. The channel of (r, c) is channel_offset + (channel_is_row ? r : c).
void QGemmPacked(const QPackedA& a, const QPackedB& b, const QOutput& out, bool channel_is_row,
                 int64_t channel_offset, void* y, int64_t ldy, int threads);

// The same epilogue on a ready int32 accumulator (rows x cols, row-major) — used after oneDNN.
void QEpilogueCpu(const QOutput& out, const int32_t* acc, int64_t rows, int64_t cols, bool channel_is_row,
                  int64_t channel_offset, void* y, int64_t ldy, int threads);

// oneDNN's dnnl_gemm_{u8,s8}s8s32: acc = (a - a_zp) * (b - b_zp) with scalar zero points; b must
// be int8. Returns false (and computes nothing) when the operands do not fit that interface.
bool QGemmAccOneDnn(const QMatrix& a, const QMatrix& b, int64_t M, int64_t N, int64_t K, int32_t* acc, int threads);

enum class QGemmBackend { kOwn = 0, kOneDnn = 1 };
// WHITTLE_QGEMM=own|onednn, else the built-in default chosen by tests/bench/qgemm_bench.cc.
QGemmBackend DefaultQGemmBackend();

}  // namespace whittle
