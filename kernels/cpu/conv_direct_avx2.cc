// conv_direct.h's tile on AVX2 + FMA (compiled with -mavx2 -mfma -mno-avx512f: see CMakeLists.txt).
#include "kernels/cpu/isa/avx2.h"
#include "kernels/cpu/conv_direct.h"

namespace whittle::cpu::conv_direct_avx2 {

using V = isa::Avx2;  // kernels/cpu/isa/avx2.h

#include "kernels/cpu/conv_direct_impl.h"  // DirectConvTile<V>, and Tile over it

void Epilogue(float* dst, const float* src, int64_t n, float bias, const float* sum, bool relu) {
  const __m256 b = _mm256_set1_ps(bias), zero = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_add_ps(_mm256_loadu_ps(src + i), b);
    if (sum) v = _mm256_add_ps(v, _mm256_loadu_ps(sum + i));
    if (relu) v = _mm256_max_ps(v, zero);
    _mm256_storeu_ps(dst + i, v);
  }
  if (i < n) {
    const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n - i)), lanes);
    __m256 v = _mm256_add_ps(_mm256_maskload_ps(src + i, mask), b);
    if (sum) v = _mm256_add_ps(v, _mm256_maskload_ps(sum + i, mask));
    if (relu) v = _mm256_max_ps(v, zero);
    _mm256_maskstore_ps(dst + i, mask, v);
  }
}

}  // namespace whittle::cpu::conv_direct_avx2
