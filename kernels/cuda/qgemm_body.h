// The CUDA backend's int8 GEMM and convolution, as bodies (kernels/cuda/hd.h): a 64x64 tile per
// block of 256 threads, each thread 4x4 int32 accumulators fed by dp4a from shared-memory tiles
// of A bytes and B words, then the requantizing epilogue of kernels/reference/qlinear.h, bit for
// bit. Both operands run in the int8 domain: a uint8 operand is XORed with 0x80 (its value - 128)
// and its zero point shifted by 128, so zero points enter only through the identity
//   sum (a - za)(b - zb) = sum ab - zb sum a - za sum b + Kp za zb     (all over the padded K)
// with the operand sums precomputed at load for the constant side. Host code here packs the
// constant operand and runs a whole QGemm / QConv through a QLaunches (the CUDA launchers in
// kernels/cuda/qlinear.cu, or the CPU emulation the tests use).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/cuda/hd.h"

namespace whittle::cuda {

constexpr int kQTileM = 64, kQTileN = 64, kQTileKw = 8, kQTileThreads = 256;

enum class QOut : int { kInt32, kFloat, kUInt8, kInt8 };

// C[z][M, N] = A[z][M, K] B[z][K, N]. A: M rows of bytes (row stride lda), XORed with a_xor (0 or
// 0x80 per byte); k >= K reads a_pad (A's zero point in the int8 domain, so padding adds 0). B:
// words [Kw][ldb] of 4 consecutive k each (int8 domain, padded by the packer). Batch z (grid z)
// advances A by a_batch bytes, B by b_batch words and C by c_batch elements.
struct QTileArgs {
  const uint8_t* a = nullptr;
  int64_t lda = 0, a_batch = 0;
  uint32_t a_xor = 0;
  int32_t a_pad = 0;
  const int32_t* b = nullptr;
  int64_t ldb = 0, b_batch = 0;
  int64_t M = 0, N = 0, K = 0, Kw = 0;
  // Split-K (one product, no batches): grid z is the split, which covers K words [z * kw_per_split,
  // (z + 1) * kw_per_split) (a multiple of kQTileKw) and stores its raw sums at
  // partial[(z * M + m) * N + n]; QSplitEpilogueAt adds the splits and runs the epilogue.
  int64_t kw_per_split = 0;  // 0: no split
  int32_t* partial = nullptr;
};

// The batch and K-word range of the block at grid z.
struct QTileRange {
  int64_t z = 0, split = 0, kw_begin = 0, kw_end = 0;
};
WH_HD QTileRange QTileRangeOf(const QTileArgs& g, int64_t grid_z) {
  QTileRange r;
  if (g.kw_per_split > 0) {
    r.split = grid_z;
    r.kw_begin = grid_z * g.kw_per_split;
    r.kw_end = r.kw_begin + g.kw_per_split < g.Kw ? r.kw_begin + g.kw_per_split : g.Kw;
  } else {
    r.z = grid_z;
    r.kw_end = g.Kw;
  }
  return r;
}

// The epilogue's parameters that do not depend on the call (device or host pointers alike).
struct QEpiParams {
  QOut out = QOut::kInt32;
  const float* mult = nullptr;
  int64_t mult_n = 1;
  const int32_t* bias = nullptr;
  int32_t zero_point = 0, qmin = 0, qmax = 0;
  bool relu = false;
};

// The epilogue of one tile product: zero-point corrections (int8 domain), then
// kernels/reference/qlinear.h's contract: + bias[c], then int32 | float(acc) * mult[c] |
// saturate(round_half_even(float(acc) * mult[c]) + zero_point), Relu clamping at 0 / zero_point.
struct QEpi {
  // rowsum_a[m] (sum of A's row over Kp) is given iff zb is non-zero somewhere; colsum_b[z][n]
  // (stride colsum_batch) iff za is. za: 1 or M values, zb: 1 or N values.
  const int32_t* za = nullptr;
  int64_t za_n = 1;
  const int32_t* zb = nullptr;
  int64_t zb_n = 1;
  const int32_t* rowsum_a = nullptr;
  const int32_t* colsum_b = nullptr;
  int64_t colsum_batch = 0;
  int32_t k_padded = 0;  // Kw * 4
  // Channel c = channel_offset + (channel_is_row ? m : n).
  bool channel_is_row = false;
  int64_t channel_offset = 0;
  QEpiParams p;
  void* c = nullptr;  // element (z, m, n) at z * c_batch + m * ldc + n
  int64_t ldc = 0, c_batch = 0;
  // > 0: the split epilogue's column n' is (z, n) = (n' / n_block, n' % n_block) — the QConv's
  // tensor-core product, whose columns are the chunk's images side by side.
  int64_t n_block = 0;
};

struct QTileSmem {
  int32_t a[kQTileKw][kQTileM];
  int32_t b[kQTileKw][kQTileN];
};

// Phase 1 of a K step: thread tid of the block at (m0, n0) loads its share of the A and B tiles.
WH_HD void QTileLoad(const QTileArgs& g, int64_t z, int64_t m0, int64_t n0, int64_t kw0, int tid, QTileSmem& s) {
  for (int i = tid; i < kQTileKw * kQTileM; i += kQTileThreads) {
    const int r = i / kQTileKw, w = i % kQTileKw;
    const int64_t m = m0 + r, k = (kw0 + w) * 4;
    uint32_t word = 0;
    for (int b = 0; b < 4; ++b) {
      const uint32_t v = m < g.M && k + b < g.K ? (g.a[z * g.a_batch + m * g.lda + k + b] ^ g.a_xor) & 0xffu
                                                : static_cast<uint32_t>(g.a_pad) & 0xffu;
      word |= v << (8 * b);
    }
    s.a[w][r] = static_cast<int32_t>(word);
  }
  for (int i = tid; i < kQTileKw * kQTileN; i += kQTileThreads) {
    const int w = i / kQTileN, col = i % kQTileN;
    const int64_t kw = kw0 + w, n = n0 + col;
    s.b[w][col] = kw < g.Kw && n < g.N ? g.b[z * g.b_batch + kw * g.ldb + n] : 0;
  }
}

// Phase 2: thread tid's 4x4 accumulators (rows ty + 16i, columns tx + 16j) over the loaded step.
WH_HD void QTileMac(const QTileSmem& s, int tid, int32_t (&acc)[4][4]) {
  const int tx = tid % 16, ty = tid / 16;
  for (int w = 0; w < kQTileKw; ++w) {
    int32_t a[4], b[4];
    for (int i = 0; i < 4; ++i) a[i] = s.a[w][ty + 16 * i];
    for (int j = 0; j < 4; ++j) b[j] = s.b[w][tx + 16 * j];
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) acc[i][j] = Dp4a(a[i], b[j], acc[i][j]);
  }
}

// colsum: B's column sum for (z, n) where the zero-point identity needs it (e.colsum_b's entry, or
// one a kernel summed itself), else null.
WH_HD void QEpilogueFinish(const QEpi& e, int64_t z, int64_t m, int64_t n, int32_t raw, const int32_t* colsum) {
  int32_t v = raw;
  const int32_t zam = e.za ? e.za[e.za_n == 1 ? 0 : m] : 0, zbn = e.zb ? e.zb[e.zb_n == 1 ? 0 : n] : 0;
  if (e.rowsum_a) v = WrapAdd32(v, -WrapMul32(zbn, e.rowsum_a[m]));
  if (colsum) v = WrapAdd32(v, -WrapMul32(zam, *colsum));
  if (e.rowsum_a && colsum) v = WrapAdd32(v, WrapMul32(WrapMul32(e.k_padded, zam), zbn));
  const int64_t c = e.channel_offset + (e.channel_is_row ? m : n);
  if (e.p.bias) v = WrapAdd32(v, e.p.bias[c]);
  const int64_t at = z * e.c_batch + m * e.ldc + n;
  if (e.p.out == QOut::kInt32) {
    static_cast<int32_t*>(e.c)[at] = v;
    return;
  }
  const float f = static_cast<float>(v) * e.p.mult[e.p.mult_n == 1 ? 0 : c];
  if (e.p.out == QOut::kFloat) {
    static_cast<float*>(e.c)[at] = e.p.relu ? (f > 0.f ? f : 0.f) : f;
    return;
  }
  // In float: exact while |f| < 2^24, and any larger value saturates the same way as in double.
  float q = RoundHalfEven(f) + static_cast<float>(e.p.zero_point);
  q = q < static_cast<float>(e.p.qmin) ? static_cast<float>(e.p.qmin) : q;
  q = q > static_cast<float>(e.p.qmax) ? static_cast<float>(e.p.qmax) : q;
  if (e.p.out == QOut::kUInt8) static_cast<uint8_t*>(e.c)[at] = static_cast<uint8_t>(static_cast<int32_t>(q));
  else static_cast<int8_t*>(e.c)[at] = static_cast<int8_t>(static_cast<int32_t>(q));
}

WH_HD void QEpilogueStore(const QEpi& e, int64_t z, int64_t m, int64_t n, int32_t raw) {
  QEpilogueFinish(e, z, m, n, raw, e.colsum_b ? e.colsum_b + z * e.colsum_batch + n : nullptr);
}

// Phase 3: thread tid stores its accumulators through the epilogue, or its split's raw sums.
WH_HD void QTileStore(const QTileArgs& g, const QEpi& e, const QTileRange& r, int64_t m0, int64_t n0, int tid,
                      const int32_t (&acc)[4][4]) {
  ForTileCells(tid, m0, n0, g.M, g.N, [&](int i, int j, int64_t m, int64_t n) {
    if (g.partial) g.partial[(r.split * g.M + m) * g.N + n] = acc[i][j];
    else QEpilogueStore(e, r.z, m, n, acc[i][j]);
  });
}

// Element i of a split product: the splits' sums added in order (wrapping, as dp4a accumulates:
// the fused path's value bit for bit), then the epilogue.
template <class I = int64_t>
WH_HD void QSplitEpilogueAt(const QTileArgs& g, const QEpi& e, int64_t splits, I i) {
  const I N = static_cast<I>(g.N), m = i / N, n = i - m * N;
  int32_t v = 0;
  for (int64_t sp = 0; sp < splits; ++sp) v = WrapAdd32(v, g.partial[(sp * g.M + m) * g.N + n]);
  if (e.n_block > 0) {
    const I nb = static_cast<I>(e.n_block), z = n / nb;
    QEpilogueStore(e, z, m, n - z * nb, v);
  } else {
    QEpilogueStore(e, 0, m, n, v);
  }
}

// Integer im2col of one group of images into B words [z][Kw][P] (P = out_h * out_w): word (kw, p)
// holds k = 4kw..4kw+3 with k = (c * k_h + i) * k_w + j; taps in the padding and k >= Kg read pad
// (x's zero point in the int8 domain). x: image z at x + z * x_batch, channels of in_h * in_w.
struct QIm2colArgs {
  const uint8_t* x = nullptr;
  int64_t x_batch = 0;
  uint32_t x_xor = 0;
  int32_t pad = 0;
  int64_t channels = 0, in_h = 0, in_w = 0, out_h = 0, out_w = 0, k_h = 0, k_w = 0;
  int64_t stride_h = 1, stride_w = 1, dil_h = 1, dil_w = 1, pad_top = 0, pad_left = 0;
  int64_t Kw = 0;
  int32_t* col = nullptr;
  // Words at col[(z * P + p) * Kw + kw] instead: bt [z * P + p][Kp] bytes, the operand of the
  // tensor-core product.
  bool transposed = false;
};

// The bytes of output position p's window in image z, k = (c * k_h + i) * k_w + j from k0 on, as
// the columns hold them: x's byte in the int8 domain, pad in the padding and past K. Index
// arithmetic in I (int32_t where the launch's range fits, as on the device): (c, i, j) is decoded
// once and stepped after.
template <class I>
struct QWindowBytes {
  const QIm2colArgs& g;
  const uint8_t* x;
  I k_h, k_w, in_h, in_w, kg, ih0, iw0, k, i, j, c;
  WH_HD QWindowBytes(const QIm2colArgs& args, I z, I p, I k0)
      : g(args), x(args.x + static_cast<int64_t>(z) * args.x_batch), k_h(static_cast<I>(args.k_h)),
        k_w(static_cast<I>(args.k_w)), in_h(static_cast<I>(args.in_h)), in_w(static_cast<I>(args.in_w)),
        kg(static_cast<I>(args.channels) * k_h * k_w), k(k0) {
    const I out_w = static_cast<I>(g.out_w), oh = p / out_w, ow = p - oh * out_w;
    ih0 = oh * static_cast<I>(g.stride_h) - static_cast<I>(g.pad_top);
    iw0 = ow * static_cast<I>(g.stride_w) - static_cast<I>(g.pad_left);
    j = k0 % k_w;
    const I t = k0 / k_w;
    i = t % k_h;
    c = t / k_h;
  }
  WH_HD uint32_t Next() {
    uint32_t v = static_cast<uint32_t>(g.pad) & 0xffu;
    if (k++ < kg) {
      const I ih = ih0 + i * static_cast<I>(g.dil_h), iw = iw0 + j * static_cast<I>(g.dil_w);
      if (ih >= 0 && ih < in_h && iw >= 0 && iw < in_w)
        v = (x[(static_cast<int64_t>(c) * in_h + ih) * in_w + iw] ^ g.x_xor) & 0xffu;
      if (++j == k_w) {
        j = 0;
        if (++i == k_h) i = 0, ++c;
      }
    }
    return v;
  }
};

// Words kw0 .. kw0 + count - 1 of output position p of image z: the window's (c, i, j) decoded
// once for all of them (a thread per word spent more in those divisions than in its stores).
template <class I = int64_t>
WH_HD void QIm2colWords(const QIm2colArgs& g, I z, I kw0, I p, I count) {
  QWindowBytes<I> bytes(g, z, p, kw0 * 4);
  const int64_t P = g.out_h * g.out_w;
  for (I kw = kw0; kw < kw0 + count; ++kw) {
    uint32_t word = 0;
    for (int b = 0; b < 4; ++b) word |= bytes.Next() << (8 * b);
    g.col[g.transposed ? (z * P + p) * g.Kw + kw : (z * g.Kw + kw) * P + p] = static_cast<int32_t>(word);
  }
}

// The integer im2col's threads: thread i of QIm2colThreads(g, images) writes kQIm2colRun words of
// one position (fewer at the end of its window). Transposed, consecutive threads take consecutive
// runs of one position's row, then the next position's (each warp stores one contiguous stretch);
// otherwise consecutive positions of one run of rows (each row's stores contiguous).
constexpr int64_t kQIm2colRun = 4;
inline int64_t QIm2colThreads(const QIm2colArgs& g, int64_t images) {
  return images * ((g.Kw + kQIm2colRun - 1) / kQIm2colRun) * g.out_h * g.out_w;
}
template <class I = int64_t>
WH_HD void QIm2colAt(const QIm2colArgs& g, I i) {
  const I P = static_cast<I>(g.out_h * g.out_w), Kw = static_cast<I>(g.Kw), run = static_cast<I>(kQIm2colRun);
  const I runs = (Kw + run - 1) / run, per_image = runs * P;
  const I z = i / per_image, r = i - z * per_image;
  const I q = g.transposed ? r % runs : r / P, p = g.transposed ? r / runs : r % P;
  const I kw0 = q * run;
  QIm2colWords<I>(g, z, kw0, p, Kw - kw0 < run ? Kw - kw0 : run);
}

// A QConv of a short K without columns (kQDirectMaxKp; the CNN's first layer: K = 9): the thread
// of output position p of image z reads its window's Kp bytes once, as QIm2colWords would pack
// them, and runs every one of the group's Mg channels over them with the weights [Mg][Kp] (int8
// domain), then the epilogue with the column sum it added itself (colsum: whether the weights'
// zero point needs it). The same int32 sums as the tiles, so the same bytes out.
constexpr int64_t kQDirectMaxKp = 32;
template <class I = int64_t>
WH_HD void QDirectConvAt(const QIm2colArgs& g, const uint8_t* w, I Mg, I Kp, const QEpi& e, bool colsum, I z, I p) {
  int32_t col[kQDirectMaxKp];
  QWindowBytes<I> bytes(g, z, p, 0);
  int32_t sum = 0;
  for (I k = 0; k < Kp; ++k) {
    col[k] = static_cast<int8_t>(static_cast<uint8_t>(bytes.Next()));
    sum = WrapAdd32(sum, col[k]);
  }
  for (I m = 0; m < Mg; ++m) {
    const uint8_t* wm = w + static_cast<int64_t>(m) * Kp;
    int32_t raw = 0;
    for (I k = 0; k < Kp; ++k) raw = WrapAdd32(raw, WrapMul32(static_cast<int8_t>(wm[k]), col[k]));
    QEpilogueFinish(e, z, m, p, raw, colsum ? &sum : nullptr);
  }
}

// sum[z * n + j] = sum over kw of the four bytes of words[z][kw][j] (words [z][Kw][n]).
WH_HD void QColumnSum(const int32_t* words, int64_t Kw, int64_t n, int64_t z, int64_t j, int32_t* sum) {
  int32_t s = 0;
  for (int64_t kw = 0; kw < Kw; ++kw) s = Dp4a(words[(z * Kw + kw) * n + j], 0x01010101, s);
  sum[z * n + j] = s;
}

// sum[m] = sum over k < K of (a[m * lda + k] ^ a_xor) as int8, plus (Kp - K) * pad.
// Element i of A in the int8 domain as [M][Kp] bytes, k >= K padded with pad (A's shifted zero
// point, so padding adds 0 to the zero-point identity): the tensor-core GEMM's A operand.
WH_HD void QToInt8At(const uint8_t* a, int64_t lda, uint32_t a_xor, int64_t K, int64_t Kp, int32_t pad, int8_t* out,
                     int64_t i) {
  const int64_t m = i / Kp, k = i % Kp;
  out[i] = k < K ? static_cast<int8_t>(static_cast<uint8_t>((a[m * lda + k] ^ a_xor) & 0xffu))
                 : static_cast<int8_t>(pad);
}

WH_HD void QRowSum(const uint8_t* a, int64_t lda, uint32_t a_xor, int64_t K, int64_t Kp, int32_t pad, int64_t m,
                   int32_t* sum) {
  int32_t s = WrapMul32(static_cast<int32_t>(Kp - K), pad);
  for (int64_t k = 0; k < K; ++k)
    s = WrapAdd32(s, static_cast<int8_t>(static_cast<uint8_t>((a[m * lda + k] ^ a_xor) & 0xffu)));
  sum[m] = s;
}

// ------------------------------------------------------------------------------------------------
// Host side: the packed constant operand and the launches of one QGemm / QConv.

// The launches a backend performs (CUDA kernels on the calling thread's stream, or the CPU
// emulation).
struct QLaunches {
  virtual ~QLaunches() = default;
  // grid_z: the batches, or the splits when g.kw_per_split is set.
  virtual void Tile(const QTileArgs& g, const QEpi& e, int64_t grid_z) = 0;
  virtual void SplitEpilogue(const QTileArgs& g, const QEpi& e, int64_t splits) = 0;
  // A [M][Kp] from bytes (QToInt8At), then C[M][N] = A B (int32, wrapping) with B as bt [N][Kp]:
  // cuBLAS's int8 tensor-core GEMM on the device. False when it cannot run this call.
  virtual void ToInt8(const uint8_t* a, int64_t lda, uint32_t a_xor, int64_t K, int64_t Kp, int32_t pad, int64_t M,
                      int8_t* out) = 0;
  virtual bool Int8Gemm(const int8_t* bt, const int8_t* a8, int32_t* c, int64_t M, int64_t N, int64_t Kp) = 0;
  virtual void Im2col(const QIm2colArgs& g, int64_t images) = 0;
  // QDirectConvAt for every (image, position) of `images` images.
  virtual void DirectConv(const QIm2colArgs& g, const uint8_t* w, int64_t Mg, int64_t Kp, const QEpi& e, bool colsum,
                          int64_t images) = 0;
  virtual void ColumnSum(const int32_t* words, int64_t Kw, int64_t n, int64_t batches, int32_t* sum) = 0;
  virtual void RowSum(const uint8_t* a, int64_t lda, uint32_t a_xor, int64_t K, int64_t Kp, int32_t pad, int64_t M,
                      int32_t* sum) = 0;
};

inline int32_t Int8Domain(uint8_t byte, bool is_uint8) {
  return is_uint8 ? static_cast<int32_t>(byte) - 128 : static_cast<int32_t>(static_cast<int8_t>(byte));
}

// QGemm's constant B [K, N] (uint8 or int8, zero point 1 or N values) as words [Kw][N] in the
// int8 domain (k >= K: 0), with its shifted zero points and column sums over Kp.
struct QPackedB {
  int64_t K = 0, N = 0, Kw = 0;
  std::vector<int32_t> words, zero_point, colsum;
  std::vector<int8_t> bt;  // [N][Kw * 4] int8-domain bytes (k >= K: 0): the tensor-core GEMM's B
  bool zero_point_nonzero = false;
};
inline QPackedB PackQGemmB(const uint8_t* b, bool is_uint8, int64_t K, int64_t N, const std::vector<int32_t>& zp) {
  QPackedB p;
  p.K = K;
  p.N = N;
  p.Kw = (K + 3) / 4;
  p.words.assign(static_cast<size_t>(p.Kw * N), 0);
  p.colsum.assign(static_cast<size_t>(N), 0);
  p.bt.assign(static_cast<size_t>(p.Kw * 4 * N), 0);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n) {
      const int32_t v = Int8Domain(b[k * N + n], is_uint8);
      p.bt[static_cast<size_t>(n * p.Kw * 4 + k)] = static_cast<int8_t>(v);
      uint32_t& w = reinterpret_cast<uint32_t&>(p.words[static_cast<size_t>((k / 4) * N + n)]);
      w |= (static_cast<uint32_t>(v) & 0xffu) << (8 * (k % 4));
      p.colsum[static_cast<size_t>(n)] += v;
    }
  for (int32_t z : zp) {
    p.zero_point.push_back(is_uint8 ? z - 128 : z);
    p.zero_point_nonzero |= p.zero_point.back() != 0;
  }
  return p;
}

// QConv's constant weights [M, Cg * k_h * k_w] as int8-domain rows of Kp bytes (padded with each
// row's zero point, so padding adds 0), with the shifted zero points and row sums over Kp.
struct QPackedW {
  int64_t M = 0, Kg = 0, Kp = 0;
  std::vector<uint8_t> bytes;
  std::vector<int32_t> zero_point, rowsum;
  bool zero_point_nonzero = false;
};
inline QPackedW PackQConvW(const uint8_t* w, bool is_uint8, int64_t M, int64_t Kg, const std::vector<int32_t>& zp) {
  QPackedW p;
  p.M = M;
  p.Kg = Kg;
  p.Kp = (Kg + 3) / 4 * 4;
  for (int32_t z : zp) {
    p.zero_point.push_back(is_uint8 ? z - 128 : z);
    p.zero_point_nonzero |= p.zero_point.back() != 0;
  }
  p.bytes.resize(static_cast<size_t>(M * p.Kp));
  p.rowsum.assign(static_cast<size_t>(M), 0);
  for (int64_t m = 0; m < M; ++m) {
    const int32_t zm = p.zero_point[p.zero_point.size() == 1 ? 0 : static_cast<size_t>(m)];
    for (int64_t k = 0; k < p.Kp; ++k) {
      const int32_t v = k < Kg ? Int8Domain(w[m * Kg + k], is_uint8) : zm;
      p.bytes[static_cast<size_t>(m * p.Kp + k)] = static_cast<uint8_t>(static_cast<uint32_t>(v) & 0xffu);
      p.rowsum[static_cast<size_t>(m)] += v;
    }
  }
  return p;
}


inline int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }


// y[rows, N] = epilogue(a[rows, K] b[K, N]) with b packed (the pointers of `packed` are where the
// backend keeps them: words, zero_point, colsum). a's zero point: one value (raw, of a's dtype).
// rowsum_scratch: rows int32 values, used only when b's zero point is non-zero.
struct QGemmDevicePtrs {
  const int8_t* bt = nullptr;  // QPackedB::bt (null: the tile kernel only)
  const int32_t* words = nullptr;
  const int32_t* zero_point = nullptr;
  const int32_t* colsum = nullptr;
  const int32_t* za = nullptr;  // one int32: a's shifted zero point
};
// Split-K: a product of few tiles (a batch-64 Linear layer is 2-4 of the 64x64 tiles, which left
// an H100 nearly idle while each block walked all of K) spreads its K words over up to
// kQMaxSplits blocks per tile, aiming at kQSplitTargetBlocks blocks, each split at least
// kQMinKwPerSplit words. 1: no split.
constexpr int64_t kQSplitTargetBlocks = 256, kQMaxSplits = 32, kQMinKwPerSplit = 4 * kQTileKw;
inline int64_t QGemmKwPerSplit(int64_t M, int64_t N, int64_t Kw) {
  const int64_t tiles = CeilDiv(M, kQTileM) * CeilDiv(N, kQTileN);
  int64_t splits = std::min(std::min(CeilDiv(kQSplitTargetBlocks, tiles), kQMaxSplits), Kw / kQMinKwPerSplit);
  if (tiles * 2 >= kQSplitTargetBlocks || splits <= 1) return 0;
  return CeilDiv(CeilDiv(Kw, splits), kQTileKw) * kQTileKw;
}
// Large products go to cuBLAS's int8 tensor-core GEMM (then the epilogue pass) instead of the
// dp4a tiles: on an H100 it took 0.4x the tile kernel's time at 1024x784x256 and 0.04x at 4096^3,
// while at batch-64 Linear shapes its two extra passes (to int8, epilogue) ate the gain.
constexpr int64_t kQInt8GemmMinMacs = int64_t{1} << 25;
inline bool QGemmUsesInt8Gemm(int64_t M, int64_t N, int64_t Kw) { return M * N * Kw * 4 >= kQInt8GemmMinMacs; }
// The tensor-core path's scratch: A in int8 ([M][Kp] bytes, in 64-int lines), then C [M][N].
inline int64_t QInt8GemmAInts(int64_t M, int64_t Kw) { return CeilDiv(M * Kw, 64) * 64; }
// Scratch (int32 values) a product of M rows needs: the split partial sums, or the tensor-core
// path's operands (0 when neither applies).
inline int64_t QGemmScratchInts(int64_t M, int64_t N, int64_t Kw) {
  if (QGemmUsesInt8Gemm(M, N, Kw)) return QInt8GemmAInts(M, Kw) + M * N;
  const int64_t per = QGemmKwPerSplit(M, N, Kw);
  return per > 0 ? CeilDiv(Kw, per) * M * N : 0;
}

inline void RunQGemmSlice(QLaunches& L, const QPackedB& shape, const QGemmDevicePtrs& bp, const uint8_t* a,
                          bool a_uint8, int32_t a_zp_shifted, int64_t rows, const QEpiParams& ep, void* y,
                          int32_t* rowsum_scratch, int32_t* scratch) {
  QTileArgs g;
  g.a = a;
  g.lda = shape.K;
  g.a_xor = a_uint8 ? 0x80u : 0u;
  g.a_pad = a_zp_shifted;
  g.b = bp.words;
  g.ldb = shape.N;
  g.M = rows;
  g.N = shape.N;
  g.K = shape.K;
  g.Kw = shape.Kw;
  QEpi e;
  e.za = bp.za;
  e.zb = bp.zero_point;
  e.zb_n = static_cast<int64_t>(shape.zero_point.size());
  e.k_padded = static_cast<int32_t>(shape.Kw * 4);
  if (shape.zero_point_nonzero) {
    L.RowSum(a, shape.K, g.a_xor, shape.K, shape.Kw * 4, a_zp_shifted, rows, rowsum_scratch);
    e.rowsum_a = rowsum_scratch;
  }
  if (a_zp_shifted != 0) e.colsum_b = bp.colsum;
  e.p = ep;
  e.c = y;
  e.ldc = shape.N;
  if (scratch && bp.bt && QGemmUsesInt8Gemm(rows, shape.N, shape.Kw)) {
    int8_t* a8 = reinterpret_cast<int8_t*>(scratch);
    int32_t* c = scratch + QInt8GemmAInts(rows, shape.Kw);
    L.ToInt8(a, shape.K, g.a_xor, shape.K, shape.Kw * 4, a_zp_shifted, rows, a8);
    if (L.Int8Gemm(bp.bt, a8, c, rows, shape.N, shape.Kw * 4)) {
      g.partial = c;  // one "split": the epilogue pass reads the int32 product
      L.SplitEpilogue(g, e, 1);
      return;
    }
  }
  g.kw_per_split = scratch ? QGemmKwPerSplit(rows, shape.N, shape.Kw) : 0;
  if (g.kw_per_split == 0) {
    L.Tile(g, e, 1);
    return;
  }
  const int64_t splits = CeilDiv(shape.Kw, g.kw_per_split);
  g.partial = scratch;
  L.Tile(g, e, splits);
  L.SplitEpilogue(g, e, splits);
}

// A launch's grid has at most 65535 blocks along y (rows) and z (batches): larger calls go in
// slices of at most kMaxGridYZ * kQTileM rows, or kMaxGridYZ images.
constexpr int64_t kMaxGridYZ = 65535;

// scratch: QGemmScratchInts(min(rows, max_rows), N, Kw) values (split partial sums or the
// tensor-core path's operands), or null (the tile kernel over all of K only).
inline void RunQGemm(QLaunches& L, const QPackedB& shape, const QGemmDevicePtrs& bp, const uint8_t* a, bool a_uint8,
                     int32_t a_zp_shifted, int64_t rows, const QEpiParams& ep, void* y, size_t y_elem,
                     int32_t* rowsum_scratch, int32_t* scratch, int64_t max_rows = kMaxGridYZ * kQTileM) {
  for (int64_t r0 = 0; r0 < rows; r0 += max_rows) {
    const int64_t n = std::min(max_rows, rows - r0);
    RunQGemmSlice(L, shape, bp, a + r0 * shape.K, a_uint8, a_zp_shifted, n, ep,
                  static_cast<char*>(y) + static_cast<size_t>(r0 * shape.N) * y_elem,
                  rowsum_scratch ? rowsum_scratch + r0 : nullptr, scratch);
  }
}

// One QConv (2-D) over `images` images of x [images, C, in_h, in_w] into y [images, M, P].
struct QConvGeometry {
  int64_t C = 0, M = 0, group = 1, in_h = 0, in_w = 0, out_h = 0, out_w = 0, k_h = 0, k_w = 0;
  int64_t stride_h = 1, stride_w = 1, dil_h = 1, dil_w = 1, pad_top = 0, pad_left = 0;
};
struct QConvDevicePtrs {
  const uint8_t* bytes = nullptr;  // the packed weights
  const int32_t* zero_point = nullptr;
  const int32_t* rowsum = nullptr;
  const int32_t* zb = nullptr;  // one int32: x's shifted zero point
};
// How a QConv chunk is computed. kAuto: kDirect for a short K (at most kQDirectMaxKp) and at most
// kQDirectMaxMg channels per group; else cuBLAS's int8 tensor-core GEMM, one product C [Mg, nb *
// P] per group over the images' transposed columns, when it is kQInt8GemmMinMacs or more and K is
// 64 or more (for the CNN's first layer, K = 9 padded to 12, cuBLAS took 158 us at batch 1024 on
// an H100, about what the whole fp32 layer takes); else the dp4a tiles, one small product per
// image. The tests force each path.
enum class QConvPath { kAuto, kTiles, kInt8Gemm, kDirect };
constexpr int64_t kQDirectMaxMg = 64;
inline QConvPath QConvPathFor(const QConvGeometry& s, int64_t Kw, int64_t nb, QConvPath force) {
  const int64_t Mg = s.M / s.group, Kp = Kw * 4;
  if (force == QConvPath::kDirect) return Kp <= kQDirectMaxKp ? QConvPath::kDirect : QConvPath::kTiles;
  if (force != QConvPath::kAuto) return force;
  if (Kp <= kQDirectMaxKp && Mg <= kQDirectMaxMg) return QConvPath::kDirect;
  if (Mg * nb * s.out_h * s.out_w * Kp >= kQInt8GemmMinMacs && Kp >= 64) return QConvPath::kInt8Gemm;
  return QConvPath::kTiles;
}
// Scratch the call needs (int32 values): the image chunk's columns, their column sums when the
// weights' zero point is non-zero, and the tensor-core product; none for the direct kernel.
// `chunk` images at a time.
inline int64_t QConvScratchInts(const QConvGeometry& s, const QPackedW& w, int64_t chunk,
                                QConvPath force = QConvPath::kAuto) {
  const int64_t P = s.out_h * s.out_w, Kw = w.Kp / 4;
  const QConvPath path = QConvPathFor(s, Kw, chunk, force);
  if (path == QConvPath::kDirect) return 0;
  return chunk * Kw * P + (w.zero_point_nonzero ? chunk * P : 0) +
         (path == QConvPath::kInt8Gemm ? (s.M / s.group) * chunk * P : 0);
}
inline void RunQConv(QLaunches& L, const QConvGeometry& s, const QPackedW& w, const QConvDevicePtrs& wp,
                     const uint8_t* x, bool x_uint8, int32_t x_zp_shifted, int64_t images, int64_t chunk,
                     const QEpiParams& ep, void* y, size_t y_elem, int32_t* scratch,
                     QConvPath force = QConvPath::kAuto) {
  chunk = std::max<int64_t>(1, std::min(chunk, kMaxGridYZ));
  const int64_t Cg = s.C / s.group, Mg = s.M / s.group, P = s.out_h * s.out_w, Kw = w.Kp / 4;
  int32_t* col = scratch;
  int32_t* colsum = scratch + chunk * Kw * P;
  int32_t* product = colsum + (w.zero_point_nonzero ? chunk * P : 0);
  for (int64_t n0 = 0; n0 < images; n0 += chunk) {
    const int64_t nb = std::min(chunk, images - n0);
    for (int64_t gi = 0; gi < s.group; ++gi) {
      QIm2colArgs ic;
      ic.x = x + (n0 * s.C + gi * Cg) * s.in_h * s.in_w;
      ic.x_batch = s.C * s.in_h * s.in_w;
      ic.x_xor = x_uint8 ? 0x80u : 0u;
      ic.pad = x_zp_shifted;
      ic.channels = Cg;
      ic.in_h = s.in_h;
      ic.in_w = s.in_w;
      ic.out_h = s.out_h;
      ic.out_w = s.out_w;
      ic.k_h = s.k_h;
      ic.k_w = s.k_w;
      ic.stride_h = s.stride_h;
      ic.stride_w = s.stride_w;
      ic.dil_h = s.dil_h;
      ic.dil_w = s.dil_w;
      ic.pad_top = s.pad_top;
      ic.pad_left = s.pad_left;
      ic.Kw = Kw;
      ic.col = col;
      QEpi e;
      const bool per_row = w.zero_point.size() > 1;
      e.za = wp.zero_point + (per_row ? gi * Mg : 0);
      e.za_n = per_row ? Mg : 1;
      e.zb = wp.zb;
      e.k_padded = static_cast<int32_t>(w.Kp);
      if (x_zp_shifted != 0) e.rowsum_a = wp.rowsum + gi * Mg;
      e.channel_is_row = true;
      e.channel_offset = gi * Mg;
      e.p = ep;
      e.c = static_cast<char*>(y) + static_cast<size_t>((n0 * s.M + gi * Mg) * P) * y_elem;
      e.ldc = P;
      e.c_batch = s.M * P;
      const QConvPath path = QConvPathFor(s, Kw, nb, force);
      if (path == QConvPath::kDirect) {
        L.DirectConv(ic, wp.bytes + gi * Mg * w.Kp, Mg, w.Kp, e, w.zero_point_nonzero, nb);
        continue;
      }
      if (path == QConvPath::kInt8Gemm) {
        // C [Mg, nb * P] = W_g [Mg][Kp] x bt^T, bt [nb * P][Kp] the transposed columns; then the
        // epilogue pass, which splits each column into (image, position).
        ic.transposed = true;
        L.Im2col(ic, nb);
        const auto* bt = reinterpret_cast<const uint8_t*>(col);
        if (L.Int8Gemm(reinterpret_cast<const int8_t*>(bt), reinterpret_cast<const int8_t*>(wp.bytes + gi * Mg * w.Kp),
                       product, Mg, nb * P, w.Kp)) {
          if (w.zero_point_nonzero) {  // each column's byte sum: a row sum of bt
            L.RowSum(bt, w.Kp, 0, w.Kp, w.Kp, 0, nb * P, colsum);
            e.colsum_b = colsum;
            e.colsum_batch = P;
          }
          QTileArgs g;
          g.M = Mg;
          g.N = nb * P;
          g.partial = product;
          e.n_block = P;
          L.SplitEpilogue(g, e, 1);
          continue;
        }
        ic.transposed = false;  // cuBLAS refused the call: the dp4a tiles below
      }
      L.Im2col(ic, nb);
      QTileArgs g;
      g.a = wp.bytes + gi * Mg * w.Kp;
      g.lda = w.Kp;
      g.a_pad = 0;  // never read: K = Kp
      g.b = col;
      g.ldb = P;
      g.b_batch = Kw * P;
      g.M = Mg;
      g.N = P;
      g.K = w.Kp;
      g.Kw = Kw;
      if (w.zero_point_nonzero) {
        L.ColumnSum(col, Kw, P, nb, colsum);
        e.colsum_b = colsum;
        e.colsum_batch = P;
      }
      L.Tile(g, e, nb);
    }
  }
}

#ifndef __CUDACC__
// The CPU emulation of the launches: every block and thread of the CUDA grid, phase by phase, in
// the order __syncthreads allows (all loads of a step, then all MACs).
struct QEmulatedLaunches : QLaunches {
  void Tile(const QTileArgs& g, const QEpi& e, int64_t grid_z) override {
    std::vector<int32_t> acc(static_cast<size_t>(kQTileThreads) * 16);
    for (int64_t gz = 0; gz < grid_z; ++gz)
      for (int64_t m0 = 0; m0 < g.M; m0 += kQTileM)
        for (int64_t n0 = 0; n0 < g.N; n0 += kQTileN) {
          const QTileRange r = QTileRangeOf(g, gz);
          QTileSmem s;
          std::fill(acc.begin(), acc.end(), 0);
          auto a = [&acc](int t) -> int32_t(&)[4][4] {
            return *reinterpret_cast<int32_t(*)[4][4]>(acc.data() + static_cast<size_t>(t) * 16);
          };
          for (int64_t kw0 = r.kw_begin; kw0 < r.kw_end; kw0 += kQTileKw) {
            for (int t = 0; t < kQTileThreads; ++t) QTileLoad(g, r.z, m0, n0, kw0, t, s);
            for (int t = 0; t < kQTileThreads; ++t) QTileMac(s, t, a(t));
          }
          for (int t = 0; t < kQTileThreads; ++t) QTileStore(g, e, r, m0, n0, t, a(t));
        }
  }
  void SplitEpilogue(const QTileArgs& g, const QEpi& e, int64_t splits) override {
    for (int64_t i = 0; i < g.M * g.N; ++i) QSplitEpilogueAt(g, e, splits, i);
  }
  void ToInt8(const uint8_t* a, int64_t lda, uint32_t a_xor, int64_t K, int64_t Kp, int32_t pad, int64_t M,
              int8_t* out) override {
    for (int64_t i = 0; i < M * Kp; ++i) QToInt8At(a, lda, a_xor, K, Kp, pad, out, i);
  }
  // cuBLAS stood in for by the plain product (int32, wrapping, as the tensor cores accumulate).
  bool Int8Gemm(const int8_t* bt, const int8_t* a8, int32_t* c, int64_t M, int64_t N, int64_t Kp) override {
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        int32_t acc = 0;
        for (int64_t k = 0; k < Kp; ++k) acc = WrapAdd32(acc, WrapMul32(a8[m * Kp + k], bt[n * Kp + k]));
        c[m * N + n] = acc;
      }
    return true;
  }
  void Im2col(const QIm2colArgs& g, int64_t images) override {
    for (int64_t i = 0, n = QIm2colThreads(g, images); i < n; ++i) QIm2colAt(g, i);
  }
  void DirectConv(const QIm2colArgs& g, const uint8_t* w, int64_t Mg, int64_t Kp, const QEpi& e, bool colsum,
                  int64_t images) override {
    for (int64_t z = 0; z < images; ++z)
      for (int64_t p = 0; p < g.out_h * g.out_w; ++p) QDirectConvAt(g, w, Mg, Kp, e, colsum, z, p);
  }
  void ColumnSum(const int32_t* words, int64_t Kw, int64_t n, int64_t batches, int32_t* sum) override {
    for (int64_t z = 0; z < batches; ++z)
      for (int64_t j = 0; j < n; ++j) QColumnSum(words, Kw, n, z, j, sum);
  }
  void RowSum(const uint8_t* a, int64_t lda, uint32_t a_xor, int64_t K, int64_t Kp, int32_t pad, int64_t M,
              int32_t* sum) override {
    for (int64_t m = 0; m < M; ++m) QRowSum(a, lda, a_xor, K, Kp, pad, m, sum);
  }
};
#endif

}  // namespace whittle::cuda
