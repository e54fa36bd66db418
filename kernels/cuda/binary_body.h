// The CUDA backend's binarized and weight-shared layers (ai.whittle BinaryMatMul, BinaryConv,
// CodebookMatMul; layouts in lib/ir/binary_format.h and codebook_format.h) as bodies (kernels/cuda/hd.h).
// The weights stay on the device as the model stores them — 1 bit, or a 4/8-bit codebook index,
// per weight — and are read straight from that form by two tile products, 64x64 outputs per
// block of 256 threads, each thread 4x4 of them:
//   XNOR (activations=binary): A's rows are packed into sign bits per call (a Conv: a bit im2col
//     of each sample), and each output counts popcount((a XOR w) AND mask) over uint64 words
//     staged in shared memory; dot = valid - 2 * count, where valid is K, or for a Conv row whose
//     window reaches into the padding the number of taps inside (the mask: padding adds 0).
//     Y = beta * alpha[n] * dot + bias[n], beta = mean |A| over the row (a Conv: the sample).
//   Decoding (activations=float, and codebooks): a float tile product whose B tile is decoded as
//     it is staged — +-1 from the sign bits (alpha applied in the epilogue), or codebook[index] —
//     so no float copy of the weight exists. A Conv runs it on the float im2col of each sample.
// Host code here runs a whole layer through a BLaunches (the CUDA launchers in
// kernels/cuda/binary.cu, or the CPU emulation the tests use).
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/hd.h"
#include "kernels/cuda/im2col_body.h"
#include "kernels/cuda/window.h"
#ifndef __CUDACC__
#include "kernels/common/window.h"
#endif

namespace whittle::cuda {

constexpr int kBTileM = 64, kBTileN = 64, kBThreads = 256;
constexpr int kBTileKw = 8;   // uint64 words per XNOR step
constexpr int kFTileK = 16;   // floats per decoding step
constexpr int64_t kBMaxGridYZ = 65535;

// Where output (z, m, n) of a tile product goes, with z = image * groups + g and channel
// c = g * N + n: y[image * y_image + g * y_group + m * ldm + n * ldn] =
//   relu?(beta * alpha[c] * acc + bias[c]), alpha/bias/beta 1/0/1 where null,
//   beta = beta[image * beta_image + m * beta_row].
struct BOut {
  float* y = nullptr;
  int64_t y_image = 0, y_group = 0, ldm = 0, ldn = 1;
  int64_t groups = 1;
  const float* alpha = nullptr;
  const float* bias = nullptr;
  const float* beta = nullptr;
  int64_t beta_image = 0, beta_row = 0;
  bool relu = false;
};

WH_HD void BStore(const BOut& o, int64_t N, int64_t z, int64_t m, int64_t n, float acc) {
  const int64_t image = z / o.groups, g = z % o.groups, c = g * N + n;
  float s = o.alpha ? o.alpha[c] : 1.f;
  if (o.beta) s = o.beta[image * o.beta_image + m * o.beta_row] * s;
  const float v = s * acc + (o.bias ? o.bias[c] : 0.f);
  o.y[image * o.y_image + g * o.y_group + m * o.ldm + n * o.ldn] = o.relu && !(v > 0.f) ? 0.f : v;
}

// --- XNOR tile product ----------------------------------------------------------------------

// A(z, m): words [words] at a + z * a_batch + m * words (zero bits past K). mask: null, or row m's
// mask at mask + m * words with valid[m] its set bits (the same for every z: it depends on the
// output position only). W: group g's row n at w + (g * N + n) * words (zero bits past K).
struct BTileArgs {
  const uint64_t* a = nullptr;
  int64_t a_batch = 0;
  const uint64_t* mask = nullptr;
  const int32_t* valid = nullptr;
  const uint64_t* w = nullptr;
  int64_t M = 0, N = 0, words = 0, K = 0;
};

struct BTileSmem {
  uint64_t a[kBTileKw][kBTileM];
  uint64_t m[kBTileKw][kBTileM];
  uint64_t w[kBTileKw][kBTileN];
};

// Phase 1 of a step: thread tid of the block at (m0, n0) stages its share of words kw0.. of A,
// the mask (all ones without one) and W; zeros outside the matrices.
WH_HD void BTileLoad(const BTileArgs& g, int64_t groups, int64_t z, int64_t m0, int64_t n0, int64_t kw0, int tid,
                     BTileSmem& s) {
  const int64_t grp = z % groups;
  for (int i = tid; i < kBTileKw * kBTileM; i += kBThreads) {
    const int r = i / kBTileKw, w = i % kBTileKw;
    const int64_t m = m0 + r, kw = kw0 + w;
    const bool in = m < g.M && kw < g.words;
    s.a[w][r] = in ? g.a[z * g.a_batch + m * g.words + kw] : 0;
    s.m[w][r] = !in ? 0 : g.mask ? g.mask[m * g.words + kw] : ~uint64_t{0};
  }
  for (int i = tid; i < kBTileKw * kBTileN; i += kBThreads) {
    const int c = i / kBTileKw, w = i % kBTileKw;
    const int64_t n = n0 + c, kw = kw0 + w;
    s.w[w][c] = n < g.N && kw < g.words ? g.w[(grp * g.N + n) * g.words + kw] : 0;
  }
}

// Phase 2: thread tid's 4x4 counts (rows ty + 16i, columns tx + 16j) over the staged step.
WH_HD void BTileCount(const BTileSmem& s, int tid, int32_t (&acc)[4][4]) {
  const int tx = tid % 16, ty = tid / 16;
  for (int w = 0; w < kBTileKw; ++w) {
    uint64_t a[4], m[4], b[4];
    for (int i = 0; i < 4; ++i) {
      a[i] = s.a[w][ty + 16 * i];
      m[i] = s.m[w][ty + 16 * i];
    }
    for (int j = 0; j < 4; ++j) b[j] = s.w[w][tx + 16 * j];
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) acc[i][j] += Popc64((a[i] ^ b[j]) & m[i]);
  }
}

// Phase 3: dot = valid - 2 * count through the epilogue.
WH_HD void BTileStore(const BTileArgs& g, const BOut& o, int64_t z, int64_t m0, int64_t n0, int tid,
                      const int32_t (&acc)[4][4]) {
  ForTileCells(tid, m0, n0, g.M, g.N, [&](int i, int j, int64_t m, int64_t n) {
    const int64_t valid = g.mask ? g.valid[m] : g.K;
    BStore(o, g.N, z, m, n, static_cast<float>(valid - 2 * static_cast<int64_t>(acc[i][j])));
  });
}

// --- decoding float tile product ------------------------------------------------------------

enum class BDecode : int { kSigns, kCodebook4, kCodebook8 };

// A(z, m, k) = a[z * a_batch + m * ars + k * aks]. B(k, n) of group g from row r = g * N + n of
// the stored weight: kSigns +1 / -1 by bit k of signs + r * words; kCodebook4/8
// codebook[index r * K + k] (lib/ir/codebook_format.h's packing; indices checked at load).
struct FTileArgs {
  const float* a = nullptr;
  int64_t a_batch = 0, ars = 0, aks = 1;
  int64_t M = 0, N = 0, K = 0;
  BDecode decode = BDecode::kSigns;
  const uint64_t* signs = nullptr;
  int64_t words = 0;
  const uint8_t* index = nullptr;
  const float* codebook = nullptr;
};

struct FTileSmem {
  float a[kFTileK][kBTileM];
  float b[kFTileK][kBTileN];
};

WH_HD float BWeight(const FTileArgs& g, int64_t r, int64_t k) {
  if (g.decode == BDecode::kSigns) return (g.signs[r * g.words + (k >> 6)] >> (k & 63)) & 1u ? 1.f : -1.f;
  const int64_t e = r * g.K + k;
  const uint32_t i = g.decode == BDecode::kCodebook8 ? g.index[e] : (g.index[e >> 1] >> ((e & 1) * 4)) & 15u;
  return g.codebook[i];
}

// Phase 1: stage A's rows m0.. and B's columns n0.. over k0..k0+kFTileK (zeros outside). The
// thread order follows A's contiguous axis, so that neighbouring threads read neighbours.
WH_HD void FTileLoad(const FTileArgs& g, int64_t groups, int64_t z, int64_t m0, int64_t n0, int64_t k0, int tid,
                     FTileSmem& s) {
  const int64_t grp = z % groups;
  for (int i = tid; i < kFTileK * kBTileM; i += kBThreads) {
    const int r = g.aks == 1 ? i / kFTileK : i % kBTileM, kk = g.aks == 1 ? i % kFTileK : i / kBTileM;
    const int64_t m = m0 + r, k = k0 + kk;
    s.a[kk][r] = m < g.M && k < g.K ? g.a[z * g.a_batch + m * g.ars + k * g.aks] : 0.f;
  }
  for (int i = tid; i < kFTileK * kBTileN; i += kBThreads) {
    const int c = i / kFTileK, kk = i % kFTileK;
    const int64_t n = n0 + c, k = k0 + kk;
    s.b[kk][c] = n < g.N && k < g.K ? BWeight(g, grp * g.N + n, k) : 0.f;
  }
}

WH_HD void FTileMac(const FTileSmem& s, int tid, float (&acc)[4][4]) {
  const int tx = tid % 16, ty = tid / 16;
  for (int k = 0; k < kFTileK; ++k) {
    float a[4], b[4];
    for (int i = 0; i < 4; ++i) a[i] = s.a[k][ty + 16 * i];
    for (int j = 0; j < 4; ++j) b[j] = s.b[k][tx + 16 * j];
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];
  }
}

WH_HD void FTileStore(const FTileArgs& g, const BOut& o, int64_t z, int64_t m0, int64_t n0, int tid,
                      const float (&acc)[4][4]) {
  ForTileCells(tid, m0, n0, g.M, g.N,
               [&](int i, int j, int64_t m, int64_t n) { BStore(o, g.N, z, m, n, acc[i][j]); });
}

// --- sign packing and beta ------------------------------------------------------------------

// Word w of row r of x (row stride ld, k values): bit b set when x[r, 64w + b] >= 0.
WH_HD void BPackWord(const float* x, int64_t ld, int64_t k, int64_t words, int64_t r, int64_t w, uint64_t* bits) {
  const float* row = x + r * ld;
  uint64_t v = 0;
  for (int b = 0; b < 64 && w * 64 + b < k; ++b) v |= static_cast<uint64_t>(row[w * 64 + b] >= 0.f) << b;
  bits[r * words + w] = v;
}

// beta of a row of len values: thread tid's strided share of sum |x| (phase 1), then thread 0
// adds the kBThreads shares in order (phase 2; deterministic) and divides.
WH_HD float BAbsShare(const float* row, int64_t len, int tid) {
  float s = 0.f;
  for (int64_t i = tid; i < len; i += kBThreads) s += row[i] < 0.f ? -row[i] : row[i];
  return s;
}
WH_HD float BAbsMean(const float* shares, int64_t len) {
  float s = 0.f;
  for (int t = 0; t < kBThreads; ++t) s += shares[t];
  return s / static_cast<float>(len);
}

// --- the bit im2col of BinaryConv -------------------------------------------------------------

// One 2-D BinaryConv call: x [images, C, in_h, in_w], groups of cg input channels; a row of A is
// an output position p < P = out_h * out_w, its K = cg * k_h * k_w bits in the weight's order
// k = (c * k_h + ky) * k_w + kx.
struct BConvGeometry {
  int64_t C = 0, groups = 1, cg = 0;
  Window2d win;  // the spatial window (kernels/cuda/window.h): the float im2col's too
  int64_t K = 0, words = 0;
  WH_HD int64_t P() const { return win.out_h * win.out_w; }
};

#ifndef __CUDACC__
// The geometry of one call from its resolved shape (2-D) and K (host code only).
inline BConvGeometry BConvGeometryOf(const ConvShape& s, int64_t K) {
  BConvGeometry g;
  g.C = s.in_channels;
  g.groups = s.group;
  g.cg = s.in_channels / s.group;
  Window2d& w = g.win;
  w.in_h = s.geo.in[0];
  w.in_w = s.geo.in[1];
  w.out_h = s.geo.out[0];
  w.out_w = s.geo.out[1];
  w.k_h = s.geo.kernel[0];
  w.k_w = s.geo.kernel[1];
  w.stride_h = s.geo.stride[0];
  w.stride_w = s.geo.stride[1];
  w.dil_h = s.geo.dilation[0];
  w.dil_w = s.geo.dilation[1];
  w.pad_top = s.geo.pad_begin[0];
  w.pad_left = s.geo.pad_begin[1];
  w.pad_bottom = s.geo.pad_end[0];
  w.pad_right = s.geo.pad_end[1];
  g.K = K;
  g.words = (K + 63) / 64;
  return g;
}
#endif

// Word w of output position p: sign bits of image/group z's taps (a, when x) or the in-bounds
// taps (mask, when x is null).
WH_HD uint64_t BTapWord(const BConvGeometry& g, const float* x, int64_t z, int64_t p, int64_t w) {
  const int64_t taps = g.win.k_h * g.win.k_w, oy = p / g.win.out_w, ox = p % g.win.out_w;
  const float* xs = x ? x + ((z / g.groups) * g.C + (z % g.groups) * g.cg) * g.win.in_h * g.win.in_w : nullptr;
  int64_t k = w * 64, c = k / taps, t = k % taps, ky = t / g.win.k_w, kx = t % g.win.k_w;
  uint64_t v = 0;
  for (int b = 0; b < 64 && k < g.K; ++b, ++k) {
    const int64_t iy = oy * g.win.stride_h - g.win.pad_top + ky * g.win.dil_h, ix = ox * g.win.stride_w - g.win.pad_left + kx * g.win.dil_w;
    if (iy >= 0 && iy < g.win.in_h && ix >= 0 && ix < g.win.in_w && (!xs || xs[(c * g.win.in_h + iy) * g.win.in_w + ix] >= 0.f))
      v |= uint64_t{1} << b;
    if (++kx == g.win.k_w) {
      kx = 0;
      if (++ky == g.win.k_h) {
        ky = 0;
        ++c;
      }
    }
  }
  return v;
}

// Sign bits of images/groups z0.. (zs of them) into a [zs][P][words].
WH_HD void BIm2colWord(const BConvGeometry& g, const float* x, int64_t z, int64_t p, int64_t w, uint64_t* a) {
  a[(z * g.P() + p) * g.words + w] = BTapWord(g, x, z, p, w);
}

// Row p of the mask and its count: cg * (taps inside the input).
WH_HD void BMaskRow(const BConvGeometry& g, int64_t p, uint64_t* mask, int32_t* valid) {
  int32_t n = 0;
  for (int64_t w = 0; w < g.words; ++w) {
    const uint64_t v = BTapWord(g, nullptr, 0, p, w);
    mask[p * g.words + w] = v;
    n += Popc64(v);
  }
  valid[p] = n;
}

// ------------------------------------------------------------------------------------------------
// Host side: the launches of one layer.

// What a backend launches (CUDA kernels on the calling thread's stream, or the CPU emulation).
struct BLaunches {
  virtual ~BLaunches() = default;
  // bits [rows][words] from x's rows (stride ld, k values); beta[r] = mean |x_r| over len values
  // at x + r * len (when beta is not null; rows of that layout).
  virtual void Pack(const float* x, int64_t ld, int64_t rows, int64_t k, uint64_t* bits) = 0;
  virtual void AbsMean(const float* x, int64_t rows, int64_t len, float* beta) = 0;
  virtual void BitIm2col(const BConvGeometry& g, const float* x, int64_t zs, uint64_t* a) = 0;
  virtual void Mask(const BConvGeometry& g, uint64_t* mask, int32_t* valid) = 0;
  // col [channels * k_h * k_w][out_h * out_w] of one image slice (kernels/cuda/im2col_body.h).
  // For each of `images` images (x_stride / col_stride floats apart): LaunchIm2col's columns.
  virtual void Im2col(const float* x, int64_t x_stride, float* col, int64_t col_stride, int64_t images,
                      int64_t channels, const Window2d& w) = 0;
  virtual void Xnor(const BTileArgs& g, const BOut& o, int64_t batches) = 0;
  virtual void Decode(const FTileArgs& g, const BOut& o, int64_t batches) = 0;
};

inline int64_t BCeil(int64_t a, int64_t b) { return (a + b - 1) / b; }

// BinaryMatMul / CodebookMatMul over `rows` rows of x [rows, K] into y [rows, N]. w: the weight
// as stored (signs [N][words] or the codebook indices; codebook for kCodebook*). binary: XNOR
// (kSigns only); scratch: slice * words uint64 + slice floats (XNOR only). Rows go in slices the
// grid's y dimension can hold (a test makes them small).
struct BLinear {
  int64_t N = 0, K = 0;
  BDecode decode = BDecode::kSigns;
  bool binary = false;
  const uint64_t* signs = nullptr;
  const uint8_t* index = nullptr;
  const float* codebook = nullptr;
  const float* alpha = nullptr;
  const float* bias = nullptr;
  bool relu = false;
};

inline void RunBLinear(BLaunches& L, const BLinear& l, const float* x, int64_t rows, float* y, uint64_t* abits,
                       float* beta, int64_t slice = kBMaxGridYZ * kBTileM) {
  const int64_t words = BCeil(l.K, 64);
  for (int64_t r0 = 0; r0 < rows; r0 += slice) {
    const int64_t n = std::min(slice, rows - r0);
    BOut o;
    o.y = y + r0 * l.N;
    o.ldm = l.N;
    o.alpha = l.alpha;
    o.bias = l.bias;
    o.relu = l.relu;
    if (l.binary) {
      L.Pack(x + r0 * l.K, l.K, n, l.K, abits);
      L.AbsMean(x + r0 * l.K, n, l.K, beta);
      BTileArgs g;
      g.a = abits;
      g.w = l.signs;
      g.M = n;
      g.N = l.N;
      g.words = words;
      g.K = l.K;
      o.beta = beta;
      o.beta_row = 1;
      L.Xnor(g, o, 1);
    } else {
      FTileArgs g;
      g.a = x + r0 * l.K;
      g.ars = l.K;
      g.M = n;
      g.N = l.N;
      g.K = l.K;
      g.decode = l.decode;
      g.signs = l.signs;
      g.words = words;
      g.index = l.index;
      g.codebook = l.codebook;
      L.Decode(g, o, 1);
    }
  }
}

// BinaryConv over `images` images, `chunk` at a time (chunk * groups <= kBMaxGridYZ). Scratch:
// binary: BConvScratchBytes; float: chunk * groups * K * P floats at col.
struct BConv {
  BConvGeometry g;
  int64_t M = 0;  // output channels (all groups)
  bool binary = false;
  const uint64_t* signs = nullptr;
  const float* alpha = nullptr;
  const float* bias = nullptr;
  bool relu = false;
};

// Bytes of scratch a call needs: binary: sign bits of a chunk, the mask, valid counts, beta;
// float: the im2col of a chunk.
inline int64_t BConvScratchBytes(const BConv& c, int64_t chunk, int64_t images) {
  const int64_t P = c.g.P();
  if (!c.binary) return chunk * c.g.groups * c.g.K * P * 4;
  return (chunk * c.g.groups * P + P) * c.g.words * 8 + P * 4 + images * 4;
}

inline void RunBConv(BLaunches& L, const BConv& c, const float* x, int64_t images, int64_t chunk, float* y,
                     void* scratch) {
  const BConvGeometry& g = c.g;
  const int64_t P = g.P(), mg = c.M / g.groups, in = g.C * g.win.in_h * g.win.in_w;
  uint64_t* abits = static_cast<uint64_t*>(scratch);
  uint64_t* mask = abits + chunk * g.groups * P * g.words;
  int32_t* valid = reinterpret_cast<int32_t*>(mask + P * g.words);
  float* beta = reinterpret_cast<float*>(valid + P);
  if (c.binary) {
    L.Mask(g, mask, valid);
    L.AbsMean(x, images, in, beta);
  }
  for (int64_t n0 = 0; n0 < images; n0 += chunk) {
    const int64_t nb = std::min(chunk, images - n0), zs = nb * g.groups;
    BOut o;
    o.y = y + n0 * c.M * P;
    o.y_image = c.M * P;
    o.y_group = mg * P;
    o.ldm = 1;
    o.ldn = P;
    o.groups = g.groups;
    o.alpha = c.alpha;
    o.bias = c.bias;
    o.relu = c.relu;
    if (c.binary) {
      L.BitIm2col(g, x + n0 * in, zs, abits);
      BTileArgs t;
      t.a = abits;
      t.a_batch = P * g.words;
      t.mask = mask;
      t.valid = valid;
      t.w = c.signs;
      t.M = P;
      t.N = mg;
      t.words = g.words;
      t.K = g.K;
      o.beta = beta + n0;
      o.beta_image = 1;
      L.Xnor(t, o, zs);
    } else {
      float* col = static_cast<float*>(scratch);
      // Column block z = image * groups + group: one launch per group over the chunk's images.
      for (int64_t gi = 0; gi < g.groups; ++gi)
        L.Im2col(x + n0 * in + gi * g.cg * g.win.in_h * g.win.in_w, in, col + gi * g.K * P, g.groups * g.K * P,
                 zs / g.groups, g.cg, g.win);
      FTileArgs t;
      t.a = col;
      t.a_batch = g.K * P;
      t.ars = 1;
      t.aks = P;
      t.M = P;
      t.N = mg;
      t.K = g.K;
      t.decode = BDecode::kSigns;
      t.signs = c.signs;
      t.words = g.words;
      L.Decode(t, o, zs);
    }
  }
}

#ifndef __CUDACC__
// The CPU emulation of the launches: every block and thread of the CUDA grid, phase by phase.
struct BEmulatedLaunches : BLaunches {
  void Pack(const float* x, int64_t ld, int64_t rows, int64_t k, uint64_t* bits) override {
    const int64_t words = BCeil(k, 64);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t w = 0; w < words; ++w) BPackWord(x, ld, k, words, r, w, bits);
  }
  void AbsMean(const float* x, int64_t rows, int64_t len, float* beta) override {
    float shares[kBThreads];
    for (int64_t r = 0; r < rows; ++r) {
      for (int t = 0; t < kBThreads; ++t) shares[t] = BAbsShare(x + r * len, len, t);
      beta[r] = BAbsMean(shares, len);
    }
  }
  void BitIm2col(const BConvGeometry& g, const float* x, int64_t zs, uint64_t* a) override {
    for (int64_t z = 0; z < zs; ++z)
      for (int64_t p = 0; p < g.P(); ++p)
        for (int64_t w = 0; w < g.words; ++w) BIm2colWord(g, x, z, p, w, a);
  }
  void Mask(const BConvGeometry& g, uint64_t* mask, int32_t* valid) override {
    for (int64_t p = 0; p < g.P(); ++p) BMaskRow(g, p, mask, valid);
  }
  void Im2col(const float* x, int64_t x_stride, float* col, int64_t col_stride, int64_t images, int64_t channels,
              const Window2d& w) override {
    const int64_t hw = w.out_h * w.out_w;  // LaunchIm2col: Im2colWindowAt per (image, channel, position)
    for (int64_t z = 0; z < images; ++z)
      for (int64_t c = 0; c < channels; ++c)
        for (int64_t p = 0; p < hw; ++p) Im2colWindowAt<int64_t>(x + z * x_stride, col + z * col_stride, hw, w, c, p);
  }
  void Xnor(const BTileArgs& g, const BOut& o, int64_t batches) override {
    Grid<BTileSmem>(
        batches, g.M, g.N, g.words, kBTileKw, iacc_,
        [&](int64_t z, int64_t m0, int64_t n0, int64_t k0, int t, BTileSmem& s) { BTileLoad(g, o.groups, z, m0, n0, k0, t, s); },
        BTileCount, [&](int64_t z, int64_t m0, int64_t n0, int t, const int32_t(&a)[4][4]) { BTileStore(g, o, z, m0, n0, t, a); });
  }
  void Decode(const FTileArgs& g, const BOut& o, int64_t batches) override {
    Grid<FTileSmem>(
        batches, g.M, g.N, g.K, kFTileK, facc_,
        [&](int64_t z, int64_t m0, int64_t n0, int64_t k0, int t, FTileSmem& s) { FTileLoad(g, o.groups, z, m0, n0, k0, t, s); },
        FTileMac, [&](int64_t z, int64_t m0, int64_t n0, int t, const float(&a)[4][4]) { FTileStore(g, o, z, m0, n0, t, a); });
  }

 private:
  // Every block (z, m0, n0) of a tile product's grid, its threads phase by phase: all stage a step
  // of `steps` (`step` at a time), then all accumulate it; at the end all store.
  template <class Smem, class Acc, class Stage, class Accumulate, class Store>
  static void Grid(int64_t batches, int64_t M, int64_t N, int64_t steps, int64_t step, Acc (&acc)[kBThreads][4][4],
                   Stage stage, Accumulate accumulate, Store store) {
    for (int64_t z = 0; z < batches; ++z)
      for (int64_t m0 = 0; m0 < M; m0 += kBTileM)
        for (int64_t n0 = 0; n0 < N; n0 += kBTileN) {
          Smem s;
          for (auto& a : acc)
            for (auto& row : a) std::fill(row, row + 4, Acc{});
          for (int64_t k0 = 0; k0 < steps; k0 += step) {
            for (int t = 0; t < kBThreads; ++t) stage(z, m0, n0, k0, t, s);
            for (int t = 0; t < kBThreads; ++t) accumulate(s, t, acc[t]);
          }
          for (int t = 0; t < kBThreads; ++t) store(z, m0, n0, t, acc[t]);
        }
  }

  int32_t iacc_[kBThreads][4][4];  // each thread's registers
  float facc_[kBThreads][4][4];
};
#endif

}  // namespace whittle::cuda
