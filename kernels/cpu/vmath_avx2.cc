// vmath.h on AVX2 + FMA (compiled with -mavx2 -mfma -mno-avx512f: see CMakeLists.txt).
#include <immintrin.h>

#include "kernels/cpu/vmath.h"

namespace whittle::cpu::vmath_avx2 {
namespace {

using VFnKind = whittle::cpu::VFn;

struct V {
  using F = __m256;
  using M = __m256;
  static constexpr int kWidth = 8;
  static F Load(const float* p) { return _mm256_loadu_ps(p); }
  static void Store(float* p, F v) { _mm256_storeu_ps(p, v); }
  static F Set(float v) { return _mm256_set1_ps(v); }
  static F Add(F a, F b) { return _mm256_add_ps(a, b); }
  static F Sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static F Mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F Div(F a, F b) { return _mm256_div_ps(a, b); }
  static F Fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F Min(F a, F b) { return _mm256_min_ps(a, b); }
  static F Max(F a, F b) { return _mm256_max_ps(a, b); }
  static F Abs(F a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.f), a); }
  static F Neg(F a) { return _mm256_xor_ps(_mm256_set1_ps(-0.f), a); }
  static F CopySign(F mag, F sgn) {
    const F s = _mm256_set1_ps(-0.f);
    return _mm256_or_ps(_mm256_andnot_ps(s, mag), _mm256_and_ps(s, sgn));
  }
  static F Round(F a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static F Floor(F a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC); }
  static M Lt(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
  static M Gt(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_GT_OQ); }
  static M Eq(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_EQ_OQ); }
  static M IsNan(F a) { return _mm256_cmp_ps(a, a, _CMP_UNORD_Q); }
  static F Select(M m, F a, F b) { return _mm256_blendv_ps(b, a, m); }
  static F Pow2(F n) {
    const __m256i e = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
    return _mm256_castsi256_ps(_mm256_slli_epi32(e, 23));
  }
  static F Exponent(F x) {
    const __m256i b = _mm256_srli_epi32(_mm256_castps_si256(x), 23);
    return _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_and_si256(b, _mm256_set1_epi32(0xff)), _mm256_set1_epi32(127)));
  }
  static F Mantissa(F x) {
    const __m256i b = _mm256_and_si256(_mm256_castps_si256(x), _mm256_set1_epi32(0x007fffff));
    return _mm256_castsi256_ps(_mm256_or_si256(b, _mm256_set1_epi32(0x3f800000)));
  }
  static float Sum(F a) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
};

#include "kernels/cpu/vmath_impl.h"

}  // namespace

void Map(VFn fn, const float* x, float* y, int64_t n) { VMath<V>::Map(fn, x, y, n); }
float ExpShiftSum(const float* x, float* y, int64_t n, float shift) { return VMath<V>::ExpShiftSum(x, y, n, shift); }

float FmaLoop(int64_t iterations, double* flops) {
  constexpr int kChains = 12;  // > latency (4) x FMA units (2)
  V::F acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = V::Set(0.001f * static_cast<float>(c));
  const V::F a = V::Set(0.999999f), b = V::Set(1e-7f);
  for (int64_t i = 0; i < iterations; ++i)
    for (int c = 0; c < kChains; ++c) acc[c] = V::Fma(acc[c], a, b);
  V::F s = acc[0];
  for (int c = 1; c < kChains; ++c) s = V::Add(s, acc[c]);
  *flops = 2.0 * kChains * V::kWidth * static_cast<double>(iterations);
  return V::Sum(s);
}

}  // namespace whittle::cpu::vmath_avx2
