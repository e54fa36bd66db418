// binary_gemm.h on AVX-512 (compiled with -mavx512f -mavx512vpopcntdq -mfma: see CMakeLists.txt;
// run only where the CPU has AVX512_VPOPCNTDQ). XorPopcount: tiles of R rows of a against C
// columns of w, eight words per VPOPCNTQ, the last partial vector read with a masked load.
#include <immintrin.h>

#include "kernels/cpu/binary_gemm.h"

namespace whittle::cpu::binary_avx512 {
namespace {

// (_mm512_reduce_add_epi64 trips GCC 12's -Wuninitialized through _mm256_undefined_si256.)
inline int64_t Sum64(__m512i v) {
  alignas(64) int64_t t[8];
  _mm512_store_si512(t, v);
  return t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
}

template <int R, int C>
inline void Tile(const uint64_t* a, int64_t lda, const uint64_t* w, int64_t words, int32_t* out, int64_t ldo) {
  __m512i acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_si512();
  for (int64_t i = 0; i < words; i += 8) {
    const __mmask8 m = words - i >= 8 ? static_cast<__mmask8>(0xff) : static_cast<__mmask8>((1u << (words - i)) - 1);
    __m512i y[C];
    for (int c = 0; c < C; ++c) y[c] = _mm512_maskz_loadu_epi64(m, w + c * words + i);
    for (int r = 0; r < R; ++r) {
      const __m512i x = _mm512_maskz_loadu_epi64(m, a + r * lda + i);
      for (int c = 0; c < C; ++c) acc[r][c] = _mm512_add_epi64(acc[r][c], _mm512_popcnt_epi64(_mm512_xor_si512(x, y[c])));
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) out[r * ldo + c] = static_cast<int32_t>(Sum64(acc[r][c]));
}

template <int C>
inline void Columns(int64_t rows, const uint64_t* a, int64_t lda, const uint64_t* w, int64_t words, int32_t* out,
                    int64_t ldo) {
  int64_t r = 0;
  for (; r + 2 <= rows; r += 2) Tile<2, C>(a + r * lda, lda, w, words, out + r * ldo, ldo);
  for (; r < rows; ++r) Tile<1, C>(a + r * lda, lda, w, words, out + r * ldo, ldo);
}

}  // namespace

void XorPopcount(int64_t rows, const uint64_t* a, int64_t lda, const uint64_t* w, int64_t n, int64_t words,
                 int32_t* out, int64_t ldo) {
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) Columns<4>(rows, a, lda, w + j * words, words, out + j, ldo);
  for (; j < n; ++j) Columns<1>(rows, a, lda, w + j * words, words, out + j, ldo);
}

void DecodeSignPanel(const uint32_t* masks, int64_t K, const float* alpha, float* out) {
  const __m512 a0 = _mm512_loadu_ps(alpha), a1 = _mm512_loadu_ps(alpha + 16);
  const __m512 n0 = _mm512_sub_ps(_mm512_setzero_ps(), a0), n1 = _mm512_sub_ps(_mm512_setzero_ps(), a1);
  for (int64_t k = 0; k < K; ++k) {
    _mm512_storeu_ps(out + k * 32, _mm512_mask_blend_ps(static_cast<__mmask16>(masks[k] & 0xffff), n0, a0));
    _mm512_storeu_ps(out + k * 32 + 16, _mm512_mask_blend_ps(static_cast<__mmask16>(masks[k] >> 16), n1, a1));
  }
}

}  // namespace whittle::cpu::binary_avx512
