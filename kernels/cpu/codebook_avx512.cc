// codebook_decode.h on AVX-512F (compiled with -mavx512f -mfma: see CMakeLists.txt).
#include <immintrin.h>

#include <algorithm>

#include "kernels/cpu/codebook_decode.h"

namespace whittle::cpu::codebook_avx512 {

void DecodePanel(const uint8_t* idx, int64_t K, const float* cb, int64_t ncb, float* out) {
  if (ncb <= 16) {
    alignas(64) float t[16] = {};
    std::copy(cb, cb + ncb, t);
    const __m512 table = _mm512_load_ps(t);
    for (int64_t i = 0; i < K * 32; i += 16) {
      const __m512i x = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(idx + i)));
      _mm512_storeu_ps(out + i, _mm512_permutexvar_ps(x, table));
    }
    return;
  }
  for (int64_t i = 0; i < K * 32; i += 16) {
    const __m512i x = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(idx + i)));
    _mm512_storeu_ps(out + i, _mm512_i32gather_ps(x, cb, 4));
  }
}

}  // namespace whittle::cpu::codebook_avx512
