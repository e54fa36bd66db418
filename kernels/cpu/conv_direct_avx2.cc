// conv_direct.h's tile on AVX2 + FMA (compiled with -mavx2 -mfma -mno-avx512f: see CMakeLists.txt).
#include <immintrin.h>

#include "kernels/cpu/conv_direct.h"

namespace whittle::cpu::conv_direct_avx2 {
namespace {

struct V {
  using F = __m256;
  static constexpr int kWidth = 8;
  static F Zero() { return _mm256_setzero_ps(); }
  static F Load(const float* p) { return _mm256_loadu_ps(p); }
  static void Store(float* p, F v) { _mm256_storeu_ps(p, v); }
  static F Set(float v) { return _mm256_set1_ps(v); }
  static F Fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
};

#include "kernels/cpu/conv_direct_impl.h"

}  // namespace

void Tile(const float* in, int64_t cstride, int64_t icg, const int32_t* offs, int taps, const float* w, float* tile) {
  static_assert(DirectConvTile<V, kOcBlock, 3>::kTileWidth == kTileWidth, "tile width");
  DirectConvTile<V, kOcBlock, 3>::Run(in, cstride, icg, offs, taps, w, tile);
}

}  // namespace whittle::cpu::conv_direct_avx2
