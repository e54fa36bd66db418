// LookupBytes (kernels/cpu/lookup.h) 32 at a time. Compiled for AVX2 whatever the build targets
// (CMakeLists.txt); called only where kernels/cpu/isa/features.h says the CPU runs it.
#include <immintrin.h>

#include "kernels/cpu/lookup.h"

namespace whittle::cpu::lookup_avx2 {

int64_t Bytes(const uint8_t* x, int64_t n, const uint8_t* table, uint8_t* y) {
  // Row r of the table (entries 16r .. 16r + 15) by pshufb on the index's low nibble, kept where
  // the high nibble is r.
  int64_t i = 0;
  __m256i rows[16];
  for (int r = 0; r < 16; ++r)
    rows[r] = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(table + 16 * r)));
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  for (; i + 32 <= n; i += 32) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i));
    const __m256i lo = _mm256_and_si256(v, low4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
    __m256i out = _mm256_setzero_si256();
    for (int r = 0; r < 16; ++r)
      out = _mm256_blendv_epi8(out, _mm256_shuffle_epi8(rows[r], lo), _mm256_cmpeq_epi8(hi, _mm256_set1_epi8(static_cast<char>(r))));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), out);
  }
  return i;
}

}  // namespace whittle::cpu::lookup_avx2
