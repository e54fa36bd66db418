// Compiled for AVX-512 VBMI whatever the build targets (CMakeLists.txt); called only where
// lookup.cc found the CPU has it.
#include <immintrin.h>

#include "kernels/cpu/lookup.h"

namespace whittle::cpu::lookup_avx512vbmi {

void Bytes(const uint8_t* x, int64_t n, const uint8_t* table, uint8_t* y) {
  // vpermi2b picks from 128 bytes by the index's low 7 bits: one lookup per table half, and the
  // index's top bit chooses between them.
  const __m512i t0 = _mm512_loadu_si512(table), t1 = _mm512_loadu_si512(table + 64);
  const __m512i t2 = _mm512_loadu_si512(table + 128), t3 = _mm512_loadu_si512(table + 192);
  auto one = [&](__m512i v) {
    const __m512i lo = _mm512_permutex2var_epi8(t0, v, t1), hi = _mm512_permutex2var_epi8(t2, v, t3);
    return _mm512_mask_blend_epi8(_mm512_movepi8_mask(v), lo, hi);
  };
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) _mm512_storeu_si512(y + i, one(_mm512_loadu_si512(x + i)));
  if (i < n) {
    const __mmask64 m = (__mmask64{1} << (n - i)) - 1;
    _mm512_mask_storeu_epi8(y + i, m, one(_mm512_maskz_loadu_epi8(m, x + i)));
  }
}

}  // namespace whittle::cpu::lookup_avx512vbmi
