// packed_gemm.h's tiles on AVX-512F (compiled with -mavx512f -mfma: see CMakeLists.txt).
#include <immintrin.h>

#include "kernels/cpu/packed_gemm.h"

namespace whittle::cpu::packed_gemm_avx512 {
namespace {

struct V {
  using F = __m512;
  static constexpr int kWidth = 16;
  static __mmask16 Mask(int64_t n) { return static_cast<__mmask16>((1u << n) - 1); }
  static F Zero() { return _mm512_setzero_ps(); }
  static F Load(const float* p) { return _mm512_loadu_ps(p); }
  static F LoadN(const float* p, int64_t n) { return _mm512_maskz_loadu_ps(Mask(n), p); }
  static void Store(float* p, F v) { _mm512_storeu_ps(p, v); }
  static void StoreN(float* p, F v, int64_t n) { _mm512_mask_storeu_ps(p, Mask(n), v); }
  static F Set(float v) { return _mm512_set1_ps(v); }
  static F Fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F Add(F a, F b) { return _mm512_add_ps(a, b); }
  static F Max(F a, F b) { return _mm512_max_ps(a, b); }
};

#include "kernels/cpu/packed_gemm_impl.h"

}  // namespace

void Tile(int rows, int np, int64_t K, const float* a, int64_t lda, const float* bp, int64_t panel_stride, float* c,
          int64_t ldc, int64_t ncols, const float* bias, bool relu) {
  static_assert(kNr == 2 * V::kWidth, "panel width");
  TileDispatch<2, kMaxRows>(rows, np, K, a, lda, bp, panel_stride, c, ldc, ncols, bias, relu);
}

}  // namespace whittle::cpu::packed_gemm_avx512
