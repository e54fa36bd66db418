// codebook_decode.h on AVX2 (compiled with -mavx2 -mfma: see CMakeLists.txt).
#include <immintrin.h>

#include <algorithm>

#include "kernels/cpu/codebook_decode.h"

namespace whittle::cpu::codebook_avx2 {

void DecodePanel(const uint8_t* idx, int64_t K, const float* cb, int64_t ncb, float* out) {
  if (ncb <= 16) {
    alignas(32) float t[16] = {};
    std::copy(cb, cb + ncb, t);
    const __m256 lo = _mm256_load_ps(t), hi = _mm256_load_ps(t + 8);
    for (int64_t i = 0; i < K * 16; i += 8) {
      const __m256i x = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(idx + i)));
      // Entries 0-7 from lo, 8-15 from hi: bit 3 of the index, moved to the sign bit, picks.
      const __m256 v = _mm256_blendv_ps(_mm256_permutevar8x32_ps(lo, x), _mm256_permutevar8x32_ps(hi, x),
                                        _mm256_castsi256_ps(_mm256_slli_epi32(x, 28)));
      _mm256_storeu_ps(out + i, v);
    }
    return;
  }
  for (int64_t i = 0; i < K * 16; i += 8) {
    const __m256i x = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(idx + i)));
    _mm256_storeu_ps(out + i, _mm256_i32gather_ps(cb, x, 4));
  }
}

}  // namespace whittle::cpu::codebook_avx2
