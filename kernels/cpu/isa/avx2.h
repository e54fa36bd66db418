// The one SIMD trait struct for AVX2 + FMA: eight floats per vector F, comparisons as vector masks
// M, and the loads, stores, arithmetic and bit tricks the per-ISA templates (vmath_impl.h,
// packed_gemm_impl.h, conv_direct_impl.h, winograd_impl.h) take as their V. Include only from a
// translation unit compiled for AVX2 (*_avx2.cc). The struct lives in an anonymous namespace, so
// each such unit has its own copy and no inline function compiled for one ISA is shared.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace whittle::cpu::isa {
namespace {

struct Avx2 {
  using F = __m256;
  using M = __m256;
  static constexpr int kWidth = 8;
  // Lanes [0, n) (n in 0..8) as a load/store mask.
  static __m256i Mask(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static F Zero() { return _mm256_setzero_ps(); }
  static F Load(const float* p) { return _mm256_loadu_ps(p); }
  static F LoadN(const float* p, int64_t n) { return _mm256_maskload_ps(p, Mask(n)); }
  static void Store(float* p, F v) { _mm256_storeu_ps(p, v); }
  static void StoreN(float* p, F v, int64_t n) { _mm256_maskstore_ps(p, Mask(n), v); }
  static F Set(float v) { return _mm256_set1_ps(v); }
  static F Broadcast(const float* p) { return _mm256_broadcast_ss(p); }
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

}  // namespace
}  // namespace whittle::cpu::isa
