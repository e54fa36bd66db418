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

#include "kernels/common/quant_params.h"
#include "kernels/cpu/aligned.h"
#include "kernels/common/window.h"  // ConvShape, WindowGeometry

namespace whittle {

constexpr int64_t kQMr = 6;   // rows per A panel / micro-tile
constexpr int64_t kQNr = 16;  // columns per B panel / micro-tile

struct QPackedA {
  int64_t M = 0, K = 0, Kp = 0;  // Kp: K rounded up to even
  cpu::AlignedVector<int16_t> data;     // [M rounded up to kQMr][Kp], padding 0
};
struct QPackedB {
  int64_t K = 0, N = 0, Kp = 0;
  cpu::AlignedVector<int16_t> data;  // [ceil(N/kQNr)][Kp/2][kQNr][2]
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

// ---------------------------------------------------------------------------------------------
// u8 x s8 byte kernel. Without VNNI, vpmaddubsw multiplies unsigned by signed bytes and adds
// adjacent pairs into int16 with saturation, then vpmaddwd by ones sums pairs into int32: 32
// multiply-adds per three instructions (the int16 kernel above does 16 per two, like FP32 FMA).
// It is exact only when no pair sum can saturate: every two adjacent weights (k even, k + 1)
// need |w_k| + |w_k+1| <= 128 (255 * 128 < 32768) — always true with reduce-range=1 weights in
// [-63, 63]; with VNNI (vpdpbusd, no int16 step) it is always exact. The signed operand must be
// int8 with zero point 0 (symmetric weights, what --int8 emits); the unsigned one may be uint8,
// or int8 shifted by 128, with one zero point zx, folded in as -zx * sum_k(w) per channel.
constexpr int64_t kQ8Mr = 4;   // rows per A panel / micro-tile (AVX2 has 16 registers)
constexpr int64_t kQ8Nr = 16;  // columns per B panel

struct QPacked8 {
  int64_t rows = 0;  // A: M rows; B: N columns
  int64_t K = 0, Kq = 0;  // Kq: K rounded up to 4
  cpu::AlignedVector<uint8_t> data;  // A: [M rounded up to kQ8Mr][Kq]; B: [ceil(N/kQ8Nr)][Kq/4][kQ8Nr][4]; padding 0
  std::vector<int32_t> sums;  // the signed operand: sum_k w per row (A) or column (B)
};

// Whether the byte kernel computes exact results for int8 weights w (M x K rows, or K x N when
// k_major) with zero points w_zp.
bool Q8WeightsFit(const int8_t* w, int64_t M, int64_t K, bool k_major, const std::vector<int32_t>& w_zp);
// Weights (int8) packed as the A rows (conv: M output channels x K) or the B panels (GEMM: K x N).
void Q8PackWeightsA(const int8_t* w, int64_t M, int64_t K, QPacked8* out);
void Q8PackWeightsB(const int8_t* w, int64_t K, int64_t N, QPacked8* out);
// Activations: M x K rows (row stride ld) of uint8, or of int8 with flip = 0x80 (x ^ 0x80 = x + 128).
void Q8PackActivationsA(const void* x, int64_t M, int64_t K, int64_t ld, uint8_t flip, QPacked8* out, int threads);
// Activations as B panels from K byte rows of N values (row stride ld), e.g. QIm2ColBytes output.
void Q8PackRowsB(const uint8_t* rows, int64_t K, int64_t N, int64_t ld, QPacked8* out);

// y = epilogue(A * B - zx * sums[channel]): a.rows x b.rows written at y (row stride ldy). One of
// a, b holds the weights (its sums are used); channel_is_row says which side the channel is on
// (conv: the rows, A = weights; GEMM: the columns, B = weights).
void QGemmPacked8(const QPacked8& a, const QPacked8& b, bool a_is_weights, int32_t zx, const QOutput& out,
                  bool channel_is_row, int64_t channel_offset, void* y, int64_t ldy, int threads);

// Implicit-GEMM convolution on channels-last bytes (group 1, 1-D or 2-D), the byte kernel's
// conv path: each image is copied once into a zero-point-padded [Hp][Wp][C] buffer (int8 inputs
// shifted to unsigned), and the GEMM's A rows (one per output position) are read straight out of
// it: the taps of one kernel row are kw * C contiguous bytes when the stride and dilation along W
// are 1 (a "row segment"), else each tap's C bytes are one segment; segments are read in groups
// of four bytes, the bytes past a segment's end meeting zero weights. No im2col, no per-call
// packing: the weights are packed once as B panels (columns = output channels) in the segments'
// order, and the epilogue writes [positions][channels], transposed once into the NCHW output.
// Exact under the same condition as the byte kernel (Q8WeightsFit, checked in this order).
struct QConvNhwcWeights {
  int64_t channels = 0, kh = 1, kw = 1;  // C and the kernel (kh = 1 for 1-D)
  QPacked8 taps;  // segments of C bytes per tap, each rounded up to 4 (any stride)
  QPacked8 rows;  // segments of kw * C bytes per kernel row, rounded up to 4 (stride and
                  // dilation 1 along W); empty when C % 4 == 0 (then it is the same as taps)
};
// Packs w ([M, C, kh, kw] or [M, C, k], int8, all zero points 0) for QConvNhwc; false (nothing
// packed) when the zero points are not 0 or the byte kernel would not be exact for w.
bool QPackConvWeightsNhwc(const int8_t* w, int64_t M, int64_t C, const int64_t* kernel, int spatial,
                          const std::vector<int32_t>& w_zp, QConvNhwcWeights* out);
// Group-1 1-D or 2-D convolution of x ([N, C, ...] uint8, or int8 shifted by 128) with zero
// point x_zp into y ([N, M, ...], out's dtype). pool (optional, one entry per spatial dim): a
// max pool with that window and stride, no padding, floor mode, applied to the output (y is
// pooled); it is taken over the int32 accumulators before the epilogue, which gives the same
// bytes as pooling the outputs only because the epilogue is monotone: every multiplier >= 0
// (the caller checks).
void QConvNhwc(const ConvShape& s, const QConvNhwcWeights& w, const void* x, DType x_dtype, int32_t x_zp,
               const QOutput& out, void* y, int threads, const int64_t* pool = nullptr);

// oneDNN's dnnl_gemm_{u8,s8}s8s32: acc = op(a - a_zp) * op(b - b_zp) with scalar zero points (a
// zero-point vector whose entries are all equal counts as scalar); b must be int8. a_trans: a is
// stored K x M (row stride a.ld); b_trans: b is stored N x K. acc is M x N, row-major. Returns
// false (and computes nothing) when the operands do not fit that interface.
bool QGemmAccOneDnn(const QMatrix& a, const QMatrix& b, int64_t M, int64_t N, int64_t K, int32_t* acc, int threads,
                    bool a_trans = false, bool b_trans = false);

// Whether oneDNN runs with AVX512-VNNI (its effective ISA: the CPU, capped by ONEDNN_MAX_CPU_ISA).
// Its u8 x s8 GEMM then accumulates with vpdpbusd, whose int32 sums are exact; without it oneDNN
// adds product pairs in int16 (vpmaddubsw), which saturates.
bool CpuHasVnni();

// kOwn: our kernels (the byte kernel where exact, else the int16 one); kOwn16: only the int16
// kernel (tests and benchmarks); kOneDnn: oneDNN wherever its interface fits.
enum class QGemmBackend { kAuto = 0, kOwn = 1, kOneDnn = 2, kOwn16 = 3 };
// WHITTLE_QGEMM=own|own16|onednn forces a backend; otherwise kAuto. SetQGemmBackend overrides both
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
// Whether the byte kernel may be used (false only under kOwn16).
bool AllowQ8Kernel();

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
