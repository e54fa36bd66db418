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

// oneDNN's dnnl_gemm_{u8,s8}s8s32: acc = op(a - a_zp) * op(b - b_zp) with scalar zero points (a
// zero-point vector whose entries are all equal counts as scalar); b must be int8. a_trans: a is
// stored K x M (row stride a.ld); b_trans: b is stored N x K. acc is M x N, row-major. Returns
// false (and computes nothing) when the operands do not fit that interface.
bool QGemmAccOneDnn(const QMatrix& a, const QMatrix& b, int64_t M, int64_t N, int64_t K, int32_t* acc, int threads,
                    bool a_trans = false, bool b_trans = false);

// AVX512-VNNI at run time. oneDNN's u8 x s8 GEMM then accumulates with vpdpbusd, whose int32 sums
// are exact; without it oneDNN adds product pairs in int16 (vpmaddubsw), which saturates.
bool CpuHasVnni();

enum class QGemmBackend { kAuto = 0, kOwn = 1, kOneDnn = 2 };
// WHITTLE_QGEMM=own|onednn forces a backend; otherwise kAuto. SetQGemmBackend overrides both
// for the whole process (tests run every backend with it).
QGemmBackend DefaultQGemmBackend();
void SetQGemmBackend(QGemmBackend backend);
// Products smaller than these stay on our kernel under kAuto (tests/bench/qgemm_bench.cc and
// run-model --profile: at K = 9, the CNN's first conv, ours is faster even with VNNI; below ~4096
// outputs, e.g. a batch-1 GEMV, oneDNN's per-call cost dominates).
constexpr int64_t kOneDnnMinK = 32;
constexpr int64_t kOneDnnMinOutputs = 4096;
// Whether the M x N product a * b with inner size K runs on oneDNN: forced by WHITTLE_QGEMM, else
// (kAuto) when the CPU has VNNI, a is uint8, b int8, both zero points scalar, K >= kOneDnnMinK
// and M * N >= kOneDnnMinOutputs.
bool PreferOneDnnQGemm(const QMatrix& a, const QMatrix& b, int64_t M, int64_t N, int64_t K);

// im2col of one 1-D/2-D uint8 image (group 1) as bytes: rows k = (channel, tap) in weight order,
// columns = output positions, row stride ld; taps in the padding read x_zp. Every byte is
// XORed with flip (0x80 maps uint8 v to the int8 v - 128, for oneDNN's s8 x s8 GEMM).
void QIm2ColBytes(const ConvShape& s, const uint8_t* x_image, uint8_t x_zp, uint8_t flip, uint8_t* dst, int64_t ld);

// The same for stride-1 2-D convolutions without the per-row copies: the image's planes are
// padded once (into *planes, reused) and every im2col row is one contiguous slice of them, at
// the padded row pitch Wp (returned): out[0] * Wp columns per image, of which those with
// ow >= out[1] are garbage for the epilogue to skip.
int64_t QIm2ColBytesPadded(const ConvShape& s, const uint8_t* x_image, uint8_t x_zp, uint8_t flip,
                           std::vector<uint8_t>* planes, uint8_t* dst, int64_t ld);

// Epilogue of convolution accumulators laid out as cout rows (row stride acc_ld) of images
// side by side (image i's channel-m row starts at acc + m * acc_ld + i * image_stride, oh rows
// of ow values at row pitch `pitch`), into y as [images, cout, oh, ow].
void QConvEpilogueCpu(const QOutput& out, const int32_t* acc, int64_t cout, int64_t acc_ld, int64_t images,
                      int64_t image_stride, int64_t oh, int64_t ow, int64_t pitch, void* y, int threads);

}  // namespace whittle
