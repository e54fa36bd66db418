// packed_gemm.h's tiles on AVX2 + FMA (compiled with -mavx2 -mfma -mno-avx512f: see CMakeLists.txt).
#include <immintrin.h>

#include "kernels/cpu/packed_gemm.h"

namespace whittle::cpu::packed_gemm_avx2 {
namespace {

struct V {
  using F = __m256;
  static constexpr int kWidth = 8;
  static __m256i Mask(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static F Zero() { return _mm256_setzero_ps(); }
  static F Load(const float* p) { return _mm256_loadu_ps(p); }
  static F LoadN(const float* p, int64_t n) { return _mm256_maskload_ps(p, Mask(n)); }
  static void Store(float* p, F v) { _mm256_storeu_ps(p, v); }
  static void StoreN(float* p, F v, int64_t n) { _mm256_maskstore_ps(p, Mask(n), v); }
  static F Set(float v) { return _mm256_set1_ps(v); }
  static F Fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F Add(F a, F b) { return _mm256_add_ps(a, b); }
  static F Max(F a, F b) { return _mm256_max_ps(a, b); }
};

#include "kernels/cpu/packed_gemm_impl.h"

}  // namespace

void Tile(int rows, int np, int64_t K, const float* a, int64_t lda, const float* bp, int64_t panel_stride, float* c,
          int64_t ldc, int64_t ncols, const float* bias, bool relu) {
  static_assert(kNr == 2 * V::kWidth, "panel width");
  TileDispatch<2, kMaxRows>(rows, np, K, a, lda, bp, panel_stride, c, ldc, ncols, bias, relu);
}

}  // namespace whittle::cpu::packed_gemm_avx2
