// binary_gemm.h on AVX2 (compiled with -mavx2 -mfma -mpopcnt -mno-avx512f: see CMakeLists.txt).
// XorPopcount: a tile of one row of a against C columns of w; per 256-bit vector of XORed words
// the bytes' bit counts come from two vpshufb nibble lookups and are summed as bytes (at most 31
// vectors, 8 per byte each, before they could overflow), then folded into 64-bit lanes by vpsadbw.
// XorPopcountNibbles: the weights' nibbles one per byte (NibbleColumns), 32 columns per vector;
// a row's nibble x picks the table t_x[w] = popcount(x ^ w) and one vpshufb of it against a
// vector of 32 weight nibbles counts 128 bit products (the XOR and the index masking are folded
// into the table), one vpaddb sums them: 2 uops per 128 products against 8 per 256 above.
// SignXorGemm (activations=float, few rows): the sign bits XORed into x, then added.
#include <immintrin.h>

#include <algorithm>

#include "kernels/cpu/binary_gemm.h"
#include "kernels/cpu/binary_scalar_impl.h"
#include "lib/ir/binary_format.h"

namespace whittle::cpu::binary_avx2 {
namespace {

inline __m256i PopBytes(__m256i v, __m256i lut, __m256i low) {
  const __m256i lo = _mm256_and_si256(v, low), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
  return _mm256_add_epi8(_mm256_shuffle_epi8(lut, lo), _mm256_shuffle_epi8(lut, hi));
}

inline int64_t Sum64(__m256i v) {
  const __m128i s = _mm_add_epi64(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  return _mm_cvtsi128_si64(s) + _mm_extract_epi64(s, 1);
}

template <int C>
inline void Tile(const uint64_t* a, const uint64_t* w, int64_t words, int32_t* out) {
  const __m256i lut = _mm256_setr_epi8(0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4, 0, 1, 1, 2, 1, 2, 2, 3, 1, 2,
                                       2, 3, 2, 3, 3, 4);
  const __m256i low = _mm256_set1_epi8(0x0f), zero = _mm256_setzero_si256();
  const int64_t nv = words / 4;
  __m256i acc[C];
  for (int c = 0; c < C; ++c) acc[c] = zero;
  for (int64_t v = 0; v < nv;) {
    const int64_t end = std::min<int64_t>(nv, v + 31);
    __m256i bytes[C];
    for (int c = 0; c < C; ++c) bytes[c] = zero;
    for (; v < end; ++v) {
      const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + v * 4));
      for (int c = 0; c < C; ++c) {
        const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + c * words + v * 4));
        bytes[c] = _mm256_add_epi8(bytes[c], PopBytes(_mm256_xor_si256(x, y), lut, low));
      }
    }
    for (int c = 0; c < C; ++c) acc[c] = _mm256_add_epi64(acc[c], _mm256_sad_epu8(bytes[c], zero));
  }
  for (int c = 0; c < C; ++c) {
    int64_t s = Sum64(acc[c]);
    for (int64_t i = nv * 4; i < words; ++i) s += _mm_popcnt_u64(a[i] ^ w[c * words + i]);
    out[c] = static_cast<int32_t>(s);
  }
}

// kNibbleTables[x][w] = popcount(x ^ w) for w < 16, both 128-bit lanes alike.
struct NibbleTables {
  alignas(32) uint8_t t[16][32];
  constexpr NibbleTables() : t{} {
    for (int x = 0; x < 16; ++x)
      for (int w = 0; w < 32; ++w) {
        const int v = x ^ (w & 15);
        t[x][w] = static_cast<uint8_t>((v & 1) + ((v >> 1) & 1) + ((v >> 2) & 1) + ((v >> 3) & 1));
      }
  }
};
constexpr NibbleTables kNibbleTables;

// Byte counts grow by at most 4 per nibble: flushed into 16-bit lanes every kFlushWords words
// (48 nibbles, <= 192 per byte); the 16-bit sums go to int32 every kChunkWords words (< 65536).
constexpr int64_t kFlushWords = 3, kChunkWords = 1020;
// 3 rows x 3 panels: 9 sums + 3 tables + 1 panel vector in the 16 ymm registers; 6 loads per 9
// vpshufb (tried at M = 64, N = K = 1024: 3x3 102 us, 4x2 110, 2x4 116, 2x5 118, 4x3 and 3x4
// 134 as they spill, 2x6 132).
constexpr int kTileR = 3, kTileC = 3;

// R rows x C panels (32 columns each) of XorPopcountNibbles; `cols` valid columns from the first.
template <int R, int C>
inline void NibbleTile(const uint64_t* a, int64_t lda, const uint8_t* p, int64_t words, int32_t* out, int64_t ldo,
                       int64_t cols) {
  const int64_t pstride = words * 512;
  const __m256i lo8 = _mm256_set1_epi16(0x00ff), zero = _mm256_setzero_si256();
  const uint8_t* tables = &kNibbleTables.t[0][0];
  __m256i tot[R][C][4];  // int32 counts of columns 8q..8q+7 of panel c
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c)
      for (int q = 0; q < 4; ++q) tot[r][c][q] = zero;
  for (int64_t c0 = 0; c0 < words; c0 += kChunkWords) {
    const int64_t c1 = std::min(words, c0 + kChunkWords);
    __m256i s16[R][C][2];
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) s16[r][c][0] = s16[r][c][1] = zero;
    for (int64_t i = c0; i < c1; i += kFlushWords) {
      __m256i acc[R][C];
      for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) acc[r][c] = zero;
      const int64_t e = std::min(c1, i + kFlushWords);
      for (int64_t j = i; j < e; ++j) {
        uint64_t x[R];
        for (int r = 0; r < R; ++r) x[r] = a[r * lda + j];
        const uint8_t* pj = p + j * 512;
#pragma GCC unroll 16
        for (int s = 0; s < 16; ++s) {
          __m256i t[R];
          for (int r = 0; r < R; ++r)
            t[r] = _mm256_load_si256(reinterpret_cast<const __m256i*>(tables + (((x[r] >> (4 * s)) & 15) << 5)));
          for (int c = 0; c < C; ++c) {
            __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pj + c * pstride + s * 32));
            asm("" : "+x"(wv));  // one load per panel vector, not one folded into each row's vpshufb
            for (int r = 0; r < R; ++r) acc[r][c] = _mm256_add_epi8(acc[r][c], _mm256_shuffle_epi8(t[r], wv));
          }
          // Keeps each sum a chain in one register: unrolled, GCC reassociates the byte adds
          // into trees of all 16 lookups and spills them (2.2x slower).
          for (int r = 0; r < R; ++r)
            for (int c = 0; c < C; ++c) asm("" : "+x"(acc[r][c]));
        }
      }
      for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) {
          s16[r][c][0] = _mm256_add_epi16(s16[r][c][0], _mm256_and_si256(acc[r][c], lo8));
          s16[r][c][1] = _mm256_add_epi16(s16[r][c][1], _mm256_srli_epi16(acc[r][c], 8));
        }
    }
    // 16-bit lane i of the even sums holds byte 2i (column 2i), of the odd sums byte 2i + 1:
    // interleaved per 128-bit half, lo = columns 0..7 | 16..23, hi = 8..15 | 24..31.
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) {
        const __m256i lo = _mm256_unpacklo_epi16(s16[r][c][0], s16[r][c][1]);
        const __m256i hi = _mm256_unpackhi_epi16(s16[r][c][0], s16[r][c][1]);
        __m256i* tq = tot[r][c];
        tq[0] = _mm256_add_epi32(tq[0], _mm256_cvtepu16_epi32(_mm256_castsi256_si128(lo)));
        tq[1] = _mm256_add_epi32(tq[1], _mm256_cvtepu16_epi32(_mm256_castsi256_si128(hi)));
        tq[2] = _mm256_add_epi32(tq[2], _mm256_cvtepu16_epi32(_mm256_extracti128_si256(lo, 1)));
        tq[3] = _mm256_add_epi32(tq[3], _mm256_cvtepu16_epi32(_mm256_extracti128_si256(hi, 1)));
      }
  }
  for (int r = 0; r < R; ++r) {
    if (cols >= C * 32) {
      for (int c = 0; c < C; ++c)
        for (int q = 0; q < 4; ++q)
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + r * ldo + c * 32 + q * 8), tot[r][c][q]);
    } else {
      alignas(32) int32_t t[C * 32];
      for (int c = 0; c < C; ++c)
        for (int q = 0; q < 4; ++q) _mm256_store_si256(reinterpret_cast<__m256i*>(t + c * 32 + q * 8), tot[r][c][q]);
      std::copy(t, t + cols, out + r * ldo);
    }
  }
}

template <int C>
inline void NibbleRows(int64_t rows, const uint64_t* a, int64_t lda, const uint8_t* p, int64_t words, int32_t* out,
                       int64_t ldo, int64_t cols) {
  int64_t r = 0;
  for (; r + kTileR <= rows; r += kTileR) NibbleTile<kTileR, C>(a + r * lda, lda, p, words, out + r * ldo, ldo, cols);
  if (r + 2 <= rows) {
    NibbleTile<2, C>(a + r * lda, lda, p, words, out + r * ldo, ldo, cols);
    r += 2;
  }
  for (; r < rows; ++r) NibbleTile<1, C>(a + r * lda, lda, p, words, out + r * ldo, ldo, cols);
}

}  // namespace

void XorPopcountNibbles(int64_t rows, const uint64_t* a, int64_t lda, const uint8_t* panels, int64_t n,
                        int64_t words, int32_t* out, int64_t ldo) {
  const int64_t pstride = words * 512;
  int64_t j = 0;
  for (; j + kTileC * 32 <= n; j += kTileC * 32)
    NibbleRows<kTileC>(rows, a, lda, panels + (j / 32) * pstride, words, out + j, ldo, kTileC * 32);
  if (j + 64 <= n) {
    NibbleRows<2>(rows, a, lda, panels + (j / 32) * pstride, words, out + j, ldo, 64);
    j += 64;
  }
  for (; j < n; j += 32)
    NibbleRows<1>(rows, a, lda, panels + (j / 32) * pstride, words, out + j, ldo, std::min<int64_t>(32, n - j));
}

void XorPopcount(int64_t rows, const uint64_t* a, int64_t lda, const uint64_t* w, int64_t n, int64_t words,
                 int32_t* out, int64_t ldo) {
  // Rows shorter than one vector (a Conv's few words per im2col row): the vector tile's
  // horizontal sums would cost more than the counts; POPCNT per word instead.
  if (words < 4) return XorPopcountRows(rows, a, lda, w, n, words, out, ldo);
  int64_t j = 0;
  for (; j + 4 <= n; j += 4)
    for (int64_t r = 0; r < rows; ++r) Tile<4>(a + r * lda, w + j * words, words, out + r * ldo + j);
  for (; j < n; ++j)
    for (int64_t r = 0; r < rows; ++r) Tile<1>(a + r * lda, w + j * words, words, out + r * ldo + j);
}

double PackSigns(const float* x, int64_t k, uint64_t* out) {
  const __m256 zero = _mm256_setzero_ps(), abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 sum = zero;
  int64_t i = 0;
  for (; i + 64 <= k; i += 64) {
    uint64_t word = 0;
    for (int q = 0; q < 8; ++q) {
      const __m256 v = _mm256_loadu_ps(x + i + q * 8);
      word |= static_cast<uint64_t>(_mm256_movemask_ps(_mm256_cmp_ps(v, zero, _CMP_GE_OQ))) << (q * 8);
      sum = _mm256_add_ps(sum, _mm256_and_ps(v, abs_mask));
    }
    out[i / 64] = word;
  }
  alignas(32) float t[8];
  _mm256_store_ps(t, sum);
  double s = 0;
  for (float f : t) s += f;
  if (i < k) s += whittle::PackSigns(x + i, k - i, out + i / 64);
  return s;
}

namespace {

// R rows x P panels of 16 columns (masks K apart): per k, each panel's mask is broadcast and
// shifted so that column j's bit lands on bit 31 of lane j (vpsllvd), and the clear bits (the
// negative weights) become sign bits (vpandn); x[r, k] XOR that flips the sign where the weight
// is -1, and one add accumulates it. 2 + 2 R vector ops per 16 columns, no multiply, no decode.
template <int R, int P>
inline void SignXorTile(const float* a, int64_t lda, const uint32_t* masks, int64_t K, const float* alpha,
                        const float* bias, bool relu, float* y, int64_t ldy, int64_t cols) {
  const __m256i sh0 = _mm256_setr_epi32(31, 30, 29, 28, 27, 26, 25, 24);
  const __m256i sh1 = _mm256_setr_epi32(23, 22, 21, 20, 19, 18, 17, 16);
  const __m256i sign = _mm256_set1_epi32(static_cast<int>(0x80000000u));
  __m256 acc[R][2 * P];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < 2 * P; ++v) acc[r][v] = _mm256_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    __m256 x[R];
    for (int r = 0; r < R; ++r) x[r] = _mm256_broadcast_ss(a + r * lda + k);
    for (int p = 0; p < P; ++p) {
      const __m256i m = _mm256_set1_epi32(static_cast<int>(masks[p * K + k]));
      const __m256 s0 = _mm256_castsi256_ps(_mm256_andnot_si256(_mm256_sllv_epi32(m, sh0), sign));
      const __m256 s1 = _mm256_castsi256_ps(_mm256_andnot_si256(_mm256_sllv_epi32(m, sh1), sign));
      for (int r = 0; r < R; ++r) {
        acc[r][2 * p] = _mm256_add_ps(acc[r][2 * p], _mm256_xor_ps(x[r], s0));
        acc[r][2 * p + 1] = _mm256_add_ps(acc[r][2 * p + 1], _mm256_xor_ps(x[r], s1));
      }
    }
  }
  for (int v = 0; v < 2 * P; ++v) {
    const int64_t c = cols - v * 8;
    if (c <= 0) break;
    alignas(32) float t[R][8];
    for (int r = 0; r < R; ++r) {
      __m256 o = _mm256_mul_ps(acc[r][v], _mm256_loadu_ps(alpha + v * 8));  // alpha is padded to whole panels
      _mm256_store_ps(t[r], o);
    }
    for (int r = 0; r < R; ++r)
      for (int64_t j = 0; j < std::min<int64_t>(8, c); ++j) {
        const float o = t[r][j] + (bias ? bias[v * 8 + j] : 0.f);
        y[r * ldy + v * 8 + j] = relu && !(o > 0.f) ? 0.f : o;
      }
  }
}

}  // namespace

void SignXorGemm(int64_t rows, const float* a, int64_t lda, const uint32_t* masks, int64_t K, int64_t n,
                 const float* alpha, const float* bias, bool relu, float* y, int64_t ldy) {
  for (int64_t r = 0; r < rows;) {
    const bool two = rows - r >= 2;
    int64_t j = 0;
    for (; j + 64 <= n && !two; j += 64)
      SignXorTile<1, 4>(a + r * lda, lda, masks + (j / 16) * K, K, alpha + j, bias ? bias + j : nullptr, relu,
                        y + r * ldy + j, ldy, 64);
    for (; j + 32 <= n; j += 32) {
      if (two)
        SignXorTile<2, 2>(a + r * lda, lda, masks + (j / 16) * K, K, alpha + j, bias ? bias + j : nullptr, relu,
                          y + r * ldy + j, ldy, 32);
      else
        SignXorTile<1, 2>(a + r * lda, lda, masks + (j / 16) * K, K, alpha + j, bias ? bias + j : nullptr, relu,
                          y + r * ldy + j, ldy, 32);
    }
    for (; j < n; j += 16) {
      const int64_t c = std::min<int64_t>(16, n - j);
      SignXorTile<1, 1>(a + r * lda, lda, masks + (j / 16) * K, K, alpha + j, bias ? bias + j : nullptr, relu,
                        y + r * ldy + j, ldy, c);
      if (two)
        SignXorTile<1, 1>(a + (r + 1) * lda, lda, masks + (j / 16) * K, K, alpha + j, bias ? bias + j : nullptr, relu,
                          y + (r + 1) * ldy + j, ldy, c);
    }
    r += two ? 2 : 1;
  }
}

void DecodeSignPanel(const uint32_t* masks, int64_t K, const float* alpha, float* out) {
  const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  const __m256 a0 = _mm256_loadu_ps(alpha), a1 = _mm256_loadu_ps(alpha + 8);
  const __m256 sign = _mm256_set1_ps(-0.f);
  const __m256 n0 = _mm256_xor_ps(a0, sign), n1 = _mm256_xor_ps(a1, sign);
  for (int64_t k = 0; k < K; ++k) {
    const __m256i lo = _mm256_set1_epi32(static_cast<int>(masks[k] & 0xff));
    const __m256i hi = _mm256_set1_epi32(static_cast<int>((masks[k] >> 8) & 0xff));
    const __m256 s0 = _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(lo, bit), bit));
    const __m256 s1 = _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(hi, bit), bit));
    _mm256_storeu_ps(out + k * 16, _mm256_blendv_ps(n0, a0, s0));
    _mm256_storeu_ps(out + k * 16 + 8, _mm256_blendv_ps(n1, a1, s1));
  }
}

}  // namespace whittle::cpu::binary_avx2
