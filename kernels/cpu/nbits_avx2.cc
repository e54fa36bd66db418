// nbits_rows.h on AVX2 + FMA: 8 bytes of codes (16 weights) per step.
#include <immintrin.h>

#include "kernels/cpu/nbits_rows.h"

namespace whittle::cpu::nbits_avx2 {
namespace {

inline float Sum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// sum_j scales[j] * zp[j] * asum[j] over one row's nb blocks, 8 blocks a step.
inline float ZeroTerm(const NBitsRowsArgs& x, int64_t r, const float* asum) {
  const float* s = x.scales + r * x.nb;
  auto zp = [&](int64_t j) {
    return x.zp8 ? static_cast<float>(x.zp8[r * x.nb + j]) : x.zf ? x.zf[r * x.nb + j] : x.zdefault;
  };
  __m256 t = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= x.nb; j += 8) {
    __m256 z;
    if (x.zp8) {
      z = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(x.zp8 + r * x.nb + j))));
    } else if (x.zf) {
      z = _mm256_loadu_ps(x.zf + r * x.nb + j);
    } else {
      z = _mm256_set1_ps(x.zdefault);
    }
    t = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_loadu_ps(s + j), z), _mm256_loadu_ps(asum + j), t);
  }
  float tail = 0.f;
  for (; j < x.nb; ++j) tail += s[j] * zp(j) * asum[j];
  return Sum(t) + tail;
}

template <int MR, int NR>
void Tile(const NBitsRowsArgs& x, int64_t r0, float* out, int64_t ldo) {
  const __m256i mask = _mm256_set1_epi32(0xF);
  const int64_t nb = x.nb, block = x.block, steps = block / 16, blob = block / 2, rb = x.row_bytes;
  const uint8_t* b = x.b + r0 * rb;
  const float* s = x.scales + r0 * nb;
  __m256 tot[MR][NR];
  for (int m = 0; m < MR; ++m)
    for (int r = 0; r < NR; ++r) tot[m][r] = _mm256_setzero_ps();
  for (int64_t j = 0; j < nb; ++j) {
    __m256 acc[MR][NR];
    for (int m = 0; m < MR; ++m)
      for (int r = 0; r < NR; ++r) acc[m][r] = _mm256_setzero_ps();
    for (int64_t c = 0; c < steps; ++c) {
      const int64_t off = j * blob + c * 8, k0 = j * block + c * 16;
      for (int r = 0; r < NR; ++r) {
        const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b + r * rb + off)));
        const __m256 lo = _mm256_cvtepi32_ps(_mm256_and_si256(v, mask));
        const __m256 hi = _mm256_cvtepi32_ps(_mm256_srli_epi32(v, 4));
        for (int m = 0; m < MR; ++m) {
          acc[m][r] = _mm256_fmadd_ps(lo, _mm256_loadu_ps(x.a_perm + m * x.lda + k0), acc[m][r]);
          acc[m][r] = _mm256_fmadd_ps(hi, _mm256_loadu_ps(x.a_perm + m * x.lda + k0 + 8), acc[m][r]);
        }
      }
    }
    for (int r = 0; r < NR; ++r) {
      const __m256 sc = _mm256_set1_ps(s[r * nb + j]);
      for (int m = 0; m < MR; ++m) tot[m][r] = _mm256_fmadd_ps(sc, acc[m][r], tot[m][r]);
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
    case 1: return Rows<1, 2>(x, out, ldo);
    case 2: return Rows<2, 1>(x, out, ldo);
    case 3: return Rows<3, 1>(x, out, ldo);
    default: return Rows<4, 1>(x, out, ldo);
  }
}

}  // namespace whittle::cpu::nbits_avx2
