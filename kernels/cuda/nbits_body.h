// The arithmetic of the CUDA com.microsoft MatMulNBits kernels (4-bit codes; kernels/cuda/nbits.cu
// drives them, kernels/cuda/nbits.cc checks and launches): the nibbles of 32-bit words of codes
// (8 consecutive k of one row of B; 8 bytes always lie inside one quantization block, since
// blocks are powers of two of at least 16), the block's zero point, a lane's share of the few-row
// product (GEMV: one warp per output column) and the phases of the tiled product for many rows. WH_HD, so
// tests/kernels/cuda_nbits_body_test.cc runs them on the CPU against MatMulNBitsReference.
#pragma once

#include <cstdint>

#include "kernels/cuda/hd.h"

namespace whittle::cuda {

// One MatMulNBits call with 4-bit codes, every pointer on the device (or, in the CPU tests, the host).
struct NBitsArgs {
  const float* a = nullptr;            // [M][K]
  const uint8_t* b = nullptr;          // [N][row_bytes()], codes low nibble first along K
  const float* scales = nullptr;       // [N][blocks()]
  const uint8_t* zp_packed = nullptr;  // [N][zp_row_bytes()], two per byte low first; or null
  const float* zp_float = nullptr;     // [N][blocks()]; or null (neither: the zero point is 8)
  const float* bias = nullptr;         // [N]; or null
  float* y = nullptr;                  // [M][N]
  int64_t M = 0, N = 0, K = 0, block = 32;
  bool relu = false;  // a fused Relu (kernels/cuda/cuda_util.h's FusedKind)

  WH_HD int64_t blocks() const { return (K + block - 1) / block; }
  WH_HD int64_t row_bytes() const { return blocks() * block / 2; }
  WH_HD int64_t zp_row_bytes() const { return (blocks() + 1) / 2; }
};

// The few-row path: each block has kNBitsWarps warps, one output column each, over up to
// kNBitsRows rows of A (grid.y walks the rows); the tiled path beyond kNBitsGemvMaxRows rows.
// 32 (the CPU kernel's fused-loop limit too) is a guess, not yet measured: up to there the codes
// are read M / 4 times, mostly from L2, while a 64 x 64 tile grid of N / 64 blocks leaves most
// SMs idle at decoder widths.
constexpr int kNBitsLanes = 32, kNBitsWarps = 4, kNBitsRows = 4;
constexpr int64_t kNBitsGemvMaxRows = 32;
// The tiled path: 64 x 64 outputs per block of 256 threads (4 x 4 each, hd.h's ForTileCells),
// K in steps of 32 (4 words of codes per column).
constexpr int kNBitsTileM = 64, kNBitsTileN = 64, kNBitsTileK = 32, kNBitsThreads = 256;

WH_HD bool NBitsUseGemv(int64_t M) { return M <= kNBitsGemvMaxRows; }

// The 32-bit word at p (4-aligned on the device: rows of B are whole blocks of at least 8 bytes),
// byte 0 lowest, so nibble i is code 8 w + i.
WH_HD uint32_t NBitsWord(const uint8_t* p) {
#ifdef __CUDA_ARCH__
  return __ldg(reinterpret_cast<const unsigned int*>(p));
#else
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
#endif
}

// a[0..7]: on the device two 16-byte loads where a is 16-byte aligned (rows of A when K % 4 == 0;
// k is a multiple of 8 here), else eight.
WH_HD void NBitsLoad8(const float* a, float out[8]) {
#ifdef __CUDA_ARCH__
  if ((reinterpret_cast<uintptr_t>(a) & 15u) == 0) {
    const float4 lo = __ldg(reinterpret_cast<const float4*>(a)), hi = __ldg(reinterpret_cast<const float4*>(a) + 1);
    out[0] = lo.x, out[1] = lo.y, out[2] = lo.z, out[3] = lo.w;
    out[4] = hi.x, out[5] = hi.y, out[6] = hi.z, out[7] = hi.w;
    return;
  }
#endif
  for (int i = 0; i < 8; ++i) out[i] = a[i];
}

// The two words at p (8-aligned on the device: rows of B are whole blocks of at least 8 bytes).
WH_HD void NBitsWords2(const uint8_t* p, uint32_t out[2]) {
#ifdef __CUDA_ARCH__
  const uint2 v = __ldg(reinterpret_cast<const uint2*>(p));
  out[0] = v.x;
  out[1] = v.y;
#else
  out[0] = NBitsWord(p);
  out[1] = NBitsWord(p + 4);
#endif
}

// Unrolls the lane's loop over chunks on the device (more loads in flight per warp; g++ would
// warn of an unknown pragma).
#ifdef __CUDA_ARCH__
#define WH_NBITS_UNROLL _Pragma("unroll 4")
#else
#define WH_NBITS_UNROLL
#endif

WH_HD float NBitsNibble(uint32_t word, int i) { return static_cast<float>((word >> (4 * i)) & 15u); }

// Zero point of row n's block j: float, packed (two per byte, low nibble first), or 8.
WH_HD float NBitsZeroPoint(const NBitsArgs& g, int64_t n, int64_t j) {
  if (g.zp_float) return g.zp_float[n * g.blocks() + j];
  if (g.zp_packed) {
    const uint32_t byte = g.zp_packed[n * g.zp_row_bytes() + j / 2];
    return static_cast<float>((j & 1) ? byte >> 4 : byte & 15u);
  }
  return 8.f;
}

// W[n, 8w + i] for i < 8, 0 past K (the last block's padding codes, or words past the row).
WH_HD void NBitsDecodeWord(const NBitsArgs& g, int64_t n, int64_t w, float out[8]) {
  const int64_t k0 = 8 * w;
  if (k0 >= g.K) {
    for (int i = 0; i < 8; ++i) out[i] = 0.f;
    return;
  }
  const int64_t j = k0 / g.block;
  const uint32_t word = NBitsWord(g.b + n * g.row_bytes() + 4 * w);
  const float zp = NBitsZeroPoint(g, n, j), scale = g.scales[n * g.blocks() + j];
  for (int i = 0; i < 8; ++i) out[i] = k0 + i < g.K ? (NBitsNibble(word, i) - zp) * scale : 0.f;
}

// Lane `lane`'s share of Y[m0 + r, n] for r < kNBitsRows (rows past M are left): 8-byte chunks
// lane, lane + 32, ... of row n (16 codes each, one 8-byte load: a warp reads 256 consecutive
// bytes at a time; a chunk never straddles a block, since blocks are whole multiples of 8 bytes),
// each as scale * sum_i A[m, k_i] (code_i - zp), added to acc[r].
WH_HD void NBitsLaneDot(const NBitsArgs& g, int64_t n, int64_t m0, int lane, float acc[kNBitsRows]) {
  const uint8_t* row = g.b + n * g.row_bytes();
  const int64_t chunks = (g.K + 15) / 16;
  WH_NBITS_UNROLL
  for (int64_t v = lane; v < chunks; v += kNBitsLanes) {
    uint32_t word[2];
    NBitsWords2(row + 8 * v, word);
    const int64_t k0 = 16 * v, j = k0 / g.block;
    const float zp = NBitsZeroPoint(g, n, j), scale = g.scales[n * g.blocks() + j];
    float c[16];
    for (int i = 0; i < 16; ++i) c[i] = NBitsNibble(word[i / 8], i % 8) - zp;
    const int valid = g.K - k0 < 16 ? static_cast<int>(g.K - k0) : 16;
    for (int r = 0; r < kNBitsRows; ++r) {
      if (m0 + r >= g.M) break;
      const float* a = g.a + (m0 + r) * g.K + k0;
      float s = 0.f;
      if (valid == 16) {
        float av[8];
        NBitsLoad8(a, av);
        for (int i = 0; i < 8; ++i) s += av[i] * c[i];
        NBitsLoad8(a + 8, av);
        for (int i = 0; i < 8; ++i) s += av[i] * c[8 + i];
      } else {  // a fixed trip count keeps c in registers on the device
        for (int i = 0; i < 16; ++i)
          if (i < valid) s += a[i] * c[i];
      }
      acc[r] += s * scale;
    }
  }
}

// Y[m, n] from the full dot product: the bias, then the fused Relu.
WH_HD void NBitsStore(const NBitsArgs& g, int64_t m, int64_t n, float dot) {
  float v = dot + (g.bias ? g.bias[n] : 0.f);
  if (g.relu && v < 0.f) v = 0.f;
  g.y[m * g.N + n] = v;
}

// --- the tiled path: phases of one block, __syncthreads between them ---------------------------

struct NBitsTileSmem {
  float a[kNBitsTileK][kNBitsTileM + 1];  // A[m0 + mm, k0 + kk] at a[kk][mm]
  float w[kNBitsTileK][kNBitsTileN + 1];  // W[n0 + nn, k0 + kk] at w[kk][nn], decoded
};

// Thread tid's part of the tile's load: 8 elements of A (consecutive threads along K) and one
// word of codes (column n0 + tid / 4, word k0 / 8 + tid % 4) decoded; zeros past M, N and K.
WH_HD void NBitsTileLoad(const NBitsArgs& g, int64_t m0, int64_t n0, int64_t k0, int tid, NBitsTileSmem& s) {
  for (int e = 0; e < kNBitsTileM * kNBitsTileK / kNBitsThreads; ++e) {
    const int idx = tid + kNBitsThreads * e, mm = idx / kNBitsTileK, kk = idx % kNBitsTileK;
    const int64_t m = m0 + mm, k = k0 + kk;
    s.a[kk][mm] = m < g.M && k < g.K ? g.a[m * g.K + k] : 0.f;
  }
  const int nn = tid / 4, q = tid % 4;
  const int64_t n = n0 + nn;
  float v[8];
  if (n < g.N) {
    NBitsDecodeWord(g, n, k0 / 8 + q, v);
  } else {
    for (int i = 0; i < 8; ++i) v[i] = 0.f;
  }
  for (int i = 0; i < 8; ++i) s.w[8 * q + i][nn] = v[i];
}

// acc[i][j] += the tile's products for thread tid's cells (ForTileCells' layout).
WH_HD void NBitsTileMac(const NBitsTileSmem& s, int tid, float acc[4][4]) {
  const int tx = tid % 16, ty = tid / 16;
  for (int kk = 0; kk < kNBitsTileK; ++kk) {
    float av[4], bv[4];
    for (int i = 0; i < 4; ++i) av[i] = s.a[kk][ty + 16 * i];
    for (int j = 0; j < 4; ++j) bv[j] = s.w[kk][tx + 16 * j];
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) acc[i][j] += av[i] * bv[j];
  }
}

WH_HD void NBitsTileStore(const NBitsArgs& g, int64_t m0, int64_t n0, int tid, const float acc[4][4]) {
  ForTileCells(tid, m0, n0, g.M, g.N, [&](int i, int j, int64_t m, int64_t n) { NBitsStore(g, m, n, acc[i][j]); });
}

}  // namespace whittle::cuda
