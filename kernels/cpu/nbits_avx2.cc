// nbits_rows.h on AVX2 + FMA: 8 bytes of codes (16 weights) per step.
#include <immintrin.h>

#include "kernels/cpu/nbits_rows.h"

namespace whittle::cpu::nbits_avx2 {
namespace {

inline __m256 Step(const uint8_t* p, const float* a, __m256 acc) {
  const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  const __m256 lo = _mm256_cvtepi32_ps(_mm256_and_si256(v, _mm256_set1_epi32(0xF)));
  const __m256 hi = _mm256_cvtepi32_ps(_mm256_srli_epi32(v, 4));
  acc = _mm256_fmadd_ps(lo, _mm256_loadu_ps(a), acc);
  return _mm256_fmadd_ps(hi, _mm256_loadu_ps(a + 8), acc);
}

inline float Sum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace

void DotRows4(const float* a_perm, const uint8_t* b, int64_t row_bytes, const float* scales, int64_t nb,
              int64_t block, int64_t rows, float* out) {
  const int64_t steps = block / 16, blob = block / 2;
  int64_t r = 0;
  for (; r + 2 <= rows; r += 2) {
    const uint8_t* b0 = b + r * row_bytes;
    const uint8_t* b1 = b0 + row_bytes;
    const float* s = scales + r * nb;
    __m256 t0 = _mm256_setzero_ps(), t1 = t0;
    for (int64_t j = 0; j < nb; ++j) {
      __m256 a0 = _mm256_setzero_ps(), a1 = a0;
      const int64_t o = j * blob;
      for (int64_t c = 0; c < steps; ++c) {
        const float* ap = a_perm + j * block + c * 16;
        a0 = Step(b0 + o + c * 8, ap, a0);
        a1 = Step(b1 + o + c * 8, ap, a1);
      }
      t0 = _mm256_fmadd_ps(_mm256_set1_ps(s[j]), a0, t0);
      t1 = _mm256_fmadd_ps(_mm256_set1_ps(s[nb + j]), a1, t1);
    }
    out[r] = Sum(t0);
    out[r + 1] = Sum(t1);
  }
  for (; r < rows; ++r) {
    const uint8_t* b0 = b + r * row_bytes;
    const float* s = scales + r * nb;
    __m256 t0 = _mm256_setzero_ps();
    for (int64_t j = 0; j < nb; ++j) {
      __m256 a0 = _mm256_setzero_ps();
      for (int64_t c = 0; c < steps; ++c) a0 = Step(b0 + j * blob + c * 8, a_perm + j * block + c * 16, a0);
      t0 = _mm256_fmadd_ps(_mm256_set1_ps(s[j]), a0, t0);
    }
    out[r] = Sum(t0);
  }
}

}  // namespace whittle::cpu::nbits_avx2
