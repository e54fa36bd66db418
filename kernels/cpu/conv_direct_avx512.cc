// conv_direct.h's tile on AVX-512F (compiled with -mavx512f -mfma: see CMakeLists.txt).
#include "kernels/cpu/isa/avx512.h"
#include "kernels/cpu/conv_direct.h"

namespace whittle::cpu::conv_direct_avx512 {

using V = isa::Avx512;  // kernels/cpu/isa/avx512.h

#include "kernels/cpu/conv_direct_impl.h"  // DirectConvTile<V>, and Tile over it

void Epilogue(float* dst, const float* src, int64_t n, float bias, const float* sum, bool relu) {
  const __m512 b = _mm512_set1_ps(bias), zero = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (n - i)) - 1);
    __m512 v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, src + i), b);
    if (sum) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, sum + i));
    if (relu) v = _mm512_max_ps(v, zero);
    _mm512_mask_storeu_ps(dst + i, m, v);
  }
}

}  // namespace whittle::cpu::conv_direct_avx512
