// The one SIMD trait struct for AVX-512F: sixteen floats per vector F, comparisons as __mmask16
// M, and the same members as kernels/cpu/isa/avx2.h's Avx2 (the V of the per-ISA templates).
// Include only from a translation unit compiled for AVX-512 (*_avx512*.cc). The struct lives in an
// anonymous namespace, so each such unit has its own copy and no inline function compiled for one
// ISA is shared.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace whittle::cpu::isa {
namespace {

struct Avx512 {
  using F = __m512;
  using M = __mmask16;
  static constexpr int kWidth = 16;
  // Lanes [0, n) (n in 0..16) as a load/store mask.
  static __mmask16 Mask(int64_t n) { return static_cast<__mmask16>((1u << n) - 1); }
  static F Zero() { return _mm512_setzero_ps(); }
  static F Load(const float* p) { return _mm512_loadu_ps(p); }
  static F LoadN(const float* p, int64_t n) { return _mm512_maskz_loadu_ps(Mask(n), p); }
  static void Store(float* p, F v) { _mm512_storeu_ps(p, v); }
  static void StoreN(float* p, F v, int64_t n) { _mm512_mask_storeu_ps(p, Mask(n), v); }
  static F Set(float v) { return _mm512_set1_ps(v); }
  static F Broadcast(const float* p) { return _mm512_set1_ps(*p); }
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

}  // namespace
}  // namespace whittle::cpu::isa
