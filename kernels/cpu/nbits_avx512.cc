// nbits_rows.h on AVX-512 (F, BW, VL; FMA): 16 bytes of codes (32 weights) per step.
#include <immintrin.h>

#include "kernels/cpu/nbits_rows.h"

namespace whittle::cpu::nbits_avx512 {
namespace {

// 32 codes at p times a_perm's 32 values (16 even, 16 odd), added to acc.
inline __m512 Step(const uint8_t* p, const float* a, __m512 acc) {
  const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  const __m512 lo = _mm512_cvtepi32_ps(_mm512_and_si512(v, _mm512_set1_epi32(0xF)));
  const __m512 hi = _mm512_cvtepi32_ps(_mm512_srli_epi32(v, 4));
  acc = _mm512_fmadd_ps(lo, _mm512_loadu_ps(a), acc);
  return _mm512_fmadd_ps(hi, _mm512_loadu_ps(a + 16), acc);
}

}  // namespace

void DotRows4(const float* a_perm, const uint8_t* b, int64_t row_bytes, const float* scales, int64_t nb,
              int64_t block, int64_t rows, float* out) {
  const int64_t steps = block / 32, blob = block / 2;
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) {
    const uint8_t* b0 = b + r * row_bytes;
    const uint8_t* b1 = b0 + row_bytes;
    const uint8_t* b2 = b1 + row_bytes;
    const uint8_t* b3 = b2 + row_bytes;
    const float* s = scales + r * nb;
    __m512 t0 = _mm512_setzero_ps(), t1 = t0, t2 = t0, t3 = t0;
    for (int64_t j = 0; j < nb; ++j) {
      __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
      const int64_t o = j * blob;
      for (int64_t c = 0; c < steps; ++c) {
        const float* ap = a_perm + j * block + c * 32;
        a0 = Step(b0 + o + c * 16, ap, a0);
        a1 = Step(b1 + o + c * 16, ap, a1);
        a2 = Step(b2 + o + c * 16, ap, a2);
        a3 = Step(b3 + o + c * 16, ap, a3);
      }
      t0 = _mm512_fmadd_ps(_mm512_set1_ps(s[j]), a0, t0);
      t1 = _mm512_fmadd_ps(_mm512_set1_ps(s[nb + j]), a1, t1);
      t2 = _mm512_fmadd_ps(_mm512_set1_ps(s[2 * nb + j]), a2, t2);
      t3 = _mm512_fmadd_ps(_mm512_set1_ps(s[3 * nb + j]), a3, t3);
    }
    out[r] = _mm512_reduce_add_ps(t0);
    out[r + 1] = _mm512_reduce_add_ps(t1);
    out[r + 2] = _mm512_reduce_add_ps(t2);
    out[r + 3] = _mm512_reduce_add_ps(t3);
  }
  for (; r < rows; ++r) {
    const uint8_t* b0 = b + r * row_bytes;
    const float* s = scales + r * nb;
    __m512 t0 = _mm512_setzero_ps();
    for (int64_t j = 0; j < nb; ++j) {
      __m512 a0 = _mm512_setzero_ps();
      for (int64_t c = 0; c < steps; ++c) a0 = Step(b0 + j * blob + c * 16, a_perm + j * block + c * 32, a0);
      t0 = _mm512_fmadd_ps(_mm512_set1_ps(s[j]), a0, t0);
    }
    out[r] = _mm512_reduce_add_ps(t0);
  }
}

}  // namespace whittle::cpu::nbits_avx512
