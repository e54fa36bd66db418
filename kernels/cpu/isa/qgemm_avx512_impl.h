// The int8 kernels' AVX-512 pieces (the quantized epilogue 16 at a time, the depthwise tap sums
// 32 at a time), for the ISA policies of qgemm_kernels_avx512.cc and qgemm_kernels_avx512vnni.cc
// (kernels/cpu/isa/qgemm_kernels_impl.h). Included only by those translation units; the
// functions are templates over the policy, so no symbol is shared between ISAs.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/qgemm_tile.h"

namespace whittle::qgemm_internal {

template <class Isa>
struct QAvx512Pieces {
  // The quantized epilogue 16 at a time, the row's tail under a mask (rows of a late depthwise
  // layer are 25 or 100 long; the AVX2 form did up to 7 of them one by one). Same formula and
  // rounding as the 8-wide form; after the clamp every value is inside the output type, so
  // vpmovdb's truncation is exact.
  static int64_t EpilogueQuantized512(const Epilogue& e, const int32_t* acc, int64_t lda, int64_t rows, int64_t n,
                                      int64_t r0, int64_t c0, char* y, int64_t ldy) {
    const __m512 lo = _mm512_set1_ps(e.lo), hi = _mm512_set1_ps(e.hi);
    const __m512i zp = _mm512_set1_epi32(e.zp);
    const int32_t* const bias = e.bias.data();
    const float* const mult = e.mult.data();
    const bool per_row = e.channel_is_row;
    auto one = [&](__m512i a, __m512i b, __m512 m) {
      __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(a, b)), m);
      v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
      return _mm512_cvtepi32_epi8(_mm512_add_epi32(_mm512_cvtps_epi32(v), zp));
    };
    const int64_t nv = n / 16 * 16;
    const __mmask16 tail = static_cast<__mmask16>((1u << (n - nv)) - 1);
    for (int64_t i = 0; i < rows; ++i, acc += lda, y += ldy) {
      const __m512i rb = _mm512_set1_epi32(per_row ? bias[r0 + i] : 0);
      const __m512 rm = _mm512_set1_ps(per_row ? mult[r0 + i] : 0.f);
      int64_t j = 0;
      for (; j < nv; j += 16) {
        const __m512i a = _mm512_loadu_si512(acc + j);
        const __m128i q =
            per_row ? one(a, rb, rm) : one(a, _mm512_loadu_si512(bias + c0 + j), _mm512_loadu_ps(mult + c0 + j));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(y + j), q);
      }
      if (tail) {
        const __m512i a = _mm512_maskz_loadu_epi32(tail, acc + j);
        const __m128i q = per_row ? one(a, rb, rm)
                                  : one(a, _mm512_maskz_loadu_epi32(tail, bias + c0 + j),
                                        _mm512_maskz_loadu_ps(tail, mult + c0 + j));
        _mm_mask_storeu_epi8(y + j, tail, q);
      }
    }
    return n;
  }

  // The depthwise tap sums (see QKernelsImpl::DepthwiseTaps) 32 outputs per block in two zmm.
  static void DepthwiseTaps512(int32_t* acc, const uint8_t* const* src, const int32_t* w, int taps, int64_t n) {
    for (int64_t p = 0; p < n; p += 32) {
      __m512i a0 = _mm512_setzero_si512(), a1 = _mm512_setzero_si512();
      for (int t = 0; t < taps; ++t) {
        const __m512i wt = _mm512_set1_epi32(static_cast<uint16_t>(w[t]));
        const uint8_t* q = src[t] + p;
        a0 = _mm512_add_epi32(
            a0, _mm512_madd_epi16(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q))), wt));
        a1 = _mm512_add_epi32(
            a1, _mm512_madd_epi16(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 16))), wt));
      }
      _mm512_storeu_si512(acc + p, a0);
      _mm512_storeu_si512(acc + p + 16, a1);
    }
  }
};

}  // namespace whittle::qgemm_internal
