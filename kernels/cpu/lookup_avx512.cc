// Compiled for AVX-512 F whatever the build targets (CMakeLists.txt); called only where lookup.cc
// found the CPU has it.
#include <immintrin.h>

#include "kernels/cpu/lookup.h"

namespace whittle::cpu::lookup_avx512 {

void Floats(const uint8_t* x, int64_t n, const float* table, float* y) {
  // vpermt2ps picks from 32 floats by the index's low 5 bits: one pick per eighth of the table,
  // then bits 5, 6 and 7 choose among the eight. No gathers: they are slow where the Gather Data
  // Sampling mitigation is on.
  __m512 t[16];
  for (int k = 0; k < 16; ++k) t[k] = _mm512_loadu_ps(table + 16 * k);
  const __m512i b5 = _mm512_set1_epi32(32), b6 = _mm512_set1_epi32(64), b7 = _mm512_set1_epi32(128);
  auto one = [&](__m512i idx) {
    __m512 r[8];
    for (int k = 0; k < 8; ++k) r[k] = _mm512_permutex2var_ps(t[2 * k], idx, t[2 * k + 1]);
    const __mmask16 m5 = _mm512_test_epi32_mask(idx, b5), m6 = _mm512_test_epi32_mask(idx, b6),
                    m7 = _mm512_test_epi32_mask(idx, b7);
    const __m512 s0 = _mm512_mask_blend_ps(m5, r[0], r[1]), s1 = _mm512_mask_blend_ps(m5, r[2], r[3]);
    const __m512 s2 = _mm512_mask_blend_ps(m5, r[4], r[5]), s3 = _mm512_mask_blend_ps(m5, r[6], r[7]);
    return _mm512_mask_blend_ps(m7, _mm512_mask_blend_ps(m6, s0, s1), _mm512_mask_blend_ps(m6, s2, s3));
  };
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(y + i, one(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)))));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, m, one(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, x + i))));
  }
}

}  // namespace whittle::cpu::lookup_avx512
