// nbits_rows.h on AVX-512 (F, BW, VL; FMA): 16 bytes of codes (32 weights) per step.
#include <immintrin.h>

#include "kernels/cpu/nbits_rows.h"

namespace whittle::cpu::nbits_avx512 {
namespace {

// Horizontal sum (GCC 12's _mm512_reduce_add_ps trips its own -Wuninitialized when inlined here).
inline float Sum(__m512 v) {
  alignas(64) float t[16];
  _mm512_store_ps(t, v);
  float s = 0.f;
  for (float x : t) s += x;
  return s;
}

// sum_j scales[j] * zp[j] * asum[j] over one row's nb blocks, 16 blocks a step.
inline float ZeroTerm(const NBitsRowsArgs& x, int64_t r, const float* asum) {
  __m512 t = _mm512_setzero_ps();
  const float* s = x.scales + r * x.nb;
  for (int64_t j = 0; j < x.nb; j += 16) {
    const __mmask16 k = x.nb - j >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (x.nb - j)) - 1);
    __m512 z;
    if (x.zp8) {
      z = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(k, x.zp8 + r * x.nb + j)));
    } else if (x.zf) {
      z = _mm512_maskz_loadu_ps(k, x.zf + r * x.nb + j);
    } else {
      z = _mm512_set1_ps(x.zdefault);
    }
    t = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(k, s + j), z), _mm512_maskz_loadu_ps(k, asum + j), t);
  }
  return Sum(t);
}

// MR rows of A times NR rows of codes (from row r0): every code decoded once, MR * NR chains.
template <int MR, int NR>
void Tile(const NBitsRowsArgs& x, int64_t r0, float* out, int64_t ldo) {
  const __m512 table = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const int64_t nb = x.nb, block = x.block, steps = block / 32, blob = block / 2, rb = x.row_bytes;
  const uint8_t* b = x.b + r0 * rb;
  const float* s = x.scales + r0 * nb;
  __m512 tot[MR][NR];
  for (int m = 0; m < MR; ++m)
    for (int r = 0; r < NR; ++r) tot[m][r] = _mm512_setzero_ps();
  // The NR rows after the next NR are fetched while these run, a block's worth per block: rows are
  // short (K/2 bytes) and read side by side, which the hardware prefetcher follows too late.
  const char* ahead = reinterpret_cast<const char*>(b + 2 * NR * rb);
  for (int64_t j = 0; j < nb; ++j) {
    for (int64_t p = 0; p < NR * blob; p += 64) _mm_prefetch(ahead + j * NR * blob + p, _MM_HINT_T0);
    __m512 acc[MR][NR];
    for (int m = 0; m < MR; ++m)
      for (int r = 0; r < NR; ++r) acc[m][r] = _mm512_setzero_ps();
    for (int64_t c = 0; c < steps; ++c) {
      const int64_t off = j * blob + c * 16, k0 = j * block + c * 32;
      for (int r = 0; r < NR; ++r) {
        const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + r * rb + off)));
        // vpermt2ps with the table twice: the low 4 bits of each lane pick the entry (bit 4 picks
        // between two equal tables), so the low nibble needs no mask.
        const __m512 lo = _mm512_permutex2var_ps(table, v, table);
        const __m512 hi = _mm512_permutex2var_ps(table, _mm512_srli_epi32(v, 4), table);
        for (int m = 0; m < MR; ++m) {
          acc[m][r] = _mm512_fmadd_ps(lo, _mm512_loadu_ps(x.a_perm + m * x.lda + k0), acc[m][r]);
          acc[m][r] = _mm512_fmadd_ps(hi, _mm512_loadu_ps(x.a_perm + m * x.lda + k0 + 16), acc[m][r]);
        }
      }
    }
    for (int r = 0; r < NR; ++r) {
      const __m512 sc = _mm512_set1_ps(s[r * nb + j]);
      for (int m = 0; m < MR; ++m) tot[m][r] = _mm512_fmadd_ps(sc, acc[m][r], tot[m][r]);
    }
  }
  for (int m = 0; m < MR; ++m)
    for (int r = 0; r < NR; ++r) out[m * ldo + r] = Sum(tot[m][r]) - ZeroTerm(x, r0 + r, x.asum + m * nb);
}

template <int MR, int NR>
void Rows(const NBitsRowsArgs& x, float* out, int64_t ldo) {
  int64_t r = 0;
  for (; r + NR <= x.rows; r += NR) Tile<MR, NR>(x, r, out + r, ldo);
  for (; r < x.rows; ++r) Tile<MR, 1>(x, r, out + r, ldo);
}

}  // namespace

void DotRows(const NBitsRowsArgs& x, float* out, int64_t ldo) {
  switch (x.mr) {
    case 1: return Rows<1, 4>(x, out, ldo);
    case 2: return Rows<2, 2>(x, out, ldo);
    case 3: return Rows<3, 1>(x, out, ldo);
    default: return Rows<4, 1>(x, out, ldo);
  }
}

}  // namespace whittle::cpu::nbits_avx512
