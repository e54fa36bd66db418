// vmath.h on AVX-512F (compiled with -mavx512f -mfma: see CMakeLists.txt; only called when the
// CPU has AVX-512F).
#include <immintrin.h>

#include "kernels/cpu/vmath.h"

namespace whittle::cpu::vmath_avx512 {
namespace {

using VFnKind = whittle::cpu::VFn;

struct V {
  using F = __m512;
  using M = __mmask16;
  static constexpr int kWidth = 16;
  static F Load(const float* p) { return _mm512_loadu_ps(p); }
  static void Store(float* p, F v) { _mm512_storeu_ps(p, v); }
  static F Set(float v) { return _mm512_set1_ps(v); }
  static F Add(F a, F b) { return _mm512_add_ps(a, b); }
  static F Sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F Mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F Div(F a, F b) { return _mm512_div_ps(a, b); }
  static F Fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F Min(F a, F b) { return _mm512_min_ps(a, b); }
  static F Max(F a, F b) { return _mm512_max_ps(a, b); }
  static F Abs(F a) {
    return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(a), _mm512_set1_epi32(0x7fffffff)));
  }
  static F Neg(F a) {
    return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(a), _mm512_set1_epi32(INT32_MIN)));
  }
  static F CopySign(F mag, F sgn) {
    const __m512i m = _mm512_and_si512(_mm512_castps_si512(mag), _mm512_set1_epi32(0x7fffffff));
    const __m512i s = _mm512_and_si512(_mm512_castps_si512(sgn), _mm512_set1_epi32(INT32_MIN));
    return _mm512_castsi512_ps(_mm512_or_si512(m, s));
  }
  static F Round(F a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static F Floor(F a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC); }
  static M Lt(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
  static M Gt(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }
  static M Eq(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ); }
  static M IsNan(F a) { return _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q); }
  static F Select(M m, F a, F b) { return _mm512_mask_blend_ps(m, b, a); }
  static F Pow2(F n) {
    const __m512i e = _mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127));
    return _mm512_castsi512_ps(_mm512_slli_epi32(e, 23));
  }
  static F Exponent(F x) {
    const __m512i b = _mm512_srli_epi32(_mm512_castps_si512(x), 23);
    return _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_and_si512(b, _mm512_set1_epi32(0xff)), _mm512_set1_epi32(127)));
  }
  static F Mantissa(F x) {
    const __m512i b = _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x007fffff));
    return _mm512_castsi512_ps(_mm512_or_si512(b, _mm512_set1_epi32(0x3f800000)));
  }
  static float Sum(F a) {  // (not _mm512_reduce_add_ps: GCC 12 flags its own header, bug 105593)
    float b[16];
    _mm512_storeu_ps(b, a);
    float s = 0.f;
    for (float v : b) s += v;
    return s;
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

}  // namespace whittle::cpu::vmath_avx512
