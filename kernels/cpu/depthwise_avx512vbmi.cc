// Compiled for AVX-512 VBMI + VNNI whatever the build targets (CMakeLists.txt); called only where
// qlinear.cc found the CPU has them.
#include <immintrin.h>

#include "kernels/cpu/depthwise_window.h"

namespace whittle::cpu::depthwise_avx512vbmi {


void CopyRows(uint8_t* dst, const int64_t* dst_at, const uint8_t* src, int64_t rows, int64_t width, uint8_t flip) {
  const __m512i f = _mm512_set1_epi8(static_cast<char>(flip));
  const __mmask64 tail = width % 64 == 0 ? ~__mmask64{0} : (__mmask64{1} << (width % 64)) - 1;
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* s = src + r * width;
    uint8_t* d = dst + dst_at[r];
    int64_t c = 0;
    for (; c + 64 <= width; c += 64) _mm512_storeu_si512(d + c, _mm512_xor_si512(_mm512_loadu_si512(s + c), f));
    if (c < width) _mm512_mask_storeu_epi8(d + c, tail, _mm512_xor_si512(_mm512_maskz_loadu_epi8(tail, s + c), f));
  }
}

namespace {

template <bool kFused>
void Rows(const WindowTable& table, int32_t* acc, const uint8_t* const* rows, int kh, const int32_t* wq, int groups,
          int64_t sw, int64_t dw, int64_t out_h, int64_t out_w, int64_t pitch, const FusedRequant* rq) {
  const __m512i perm = _mm512_load_si512(table.perm);
  const __m512i bias = _mm512_set1_epi32(kFused ? rq->bias : 0), zp = _mm512_set1_epi32(kFused ? rq->zp : 0);
  const __m512 mult = _mm512_set1_ps(kFused ? rq->mult : 0.f), lo = _mm512_set1_ps(kFused ? rq->lo : 0.f),
               hi = _mm512_set1_ps(kFused ? rq->hi : 0.f);
  uint8_t* const y = kFused ? static_cast<uint8_t*>(rq->y) : nullptr;
  // 16 sums to acc, or through the epilogue (after the clamp every value fits the output type, so
  // vpmovdb's truncation is exact, as in EpilogueQuantized512).
  auto put = [&](__m512i a, int64_t at, __mmask16 m) {
    if constexpr (kFused) {
      __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(a, bias)), mult);
      v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
      _mm_mask_storeu_epi8(y + at, m, _mm512_cvtepi32_epi8(_mm512_add_epi32(_mm512_cvtps_epi32(v), zp)));
    } else {
      _mm512_mask_storeu_epi32(acc + at, m, a);
    }
  };
  // Jobs of 16 outputs along each output row, the row's last one masked; two at a time.
  const int64_t per_row = (out_w + 15) / 16, jobs = out_h * per_row;
  const __mmask16 tail = out_w % 16 == 0 ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << (out_w % 16)) - 1);
  int64_t oh = 0, v = 0;  // the next job's output row and vector in it
  for (int64_t j = 0; j < jobs; j += 2) {
    const int64_t oh0 = oh, v0 = v;
    if (++v == per_row) v = 0, ++oh;
    const bool two = j + 1 < jobs;
    const int64_t oh1 = two ? oh : oh0, v1 = two ? v : v0;
    if (two && ++v == per_row) v = 0, ++oh;
    const int64_t in0 = oh0 * pitch + 16 * sw * v0, in1 = oh1 * pitch + 16 * sw * v1;
    __m512i a0 = _mm512_setzero_si512(), a1 = _mm512_setzero_si512();
    for (int i = 0; i < kh; ++i) {
      for (int g = 0; g < groups; ++g) {
        const __m512i w = _mm512_set1_epi32(wq[i * groups + g]);
        const uint8_t* p = rows[i] + 4 * g * dw;
        a0 = _mm512_dpbusd_epi32(a0, _mm512_permutexvar_epi8(perm, _mm512_loadu_si512(p + in0)), w);
        a1 = _mm512_dpbusd_epi32(a1, _mm512_permutexvar_epi8(perm, _mm512_loadu_si512(p + in1)), w);
      }
    }
    put(a0, oh0 * out_w + 16 * v0, v0 == per_row - 1 ? tail : __mmask16{0xFFFF});
    if (two) put(a1, oh1 * out_w + 16 * v1, v1 == per_row - 1 ? tail : __mmask16{0xFFFF});
  }
}

}  // namespace

void Windows(const WindowTable& table, int32_t* acc, const uint8_t* const* rows, int kh, const int32_t* wq, int groups,
             int64_t sw, int64_t dw, int64_t out_h, int64_t out_w, int64_t pitch, const FusedRequant* rq) {
  if (rq) Rows<true>(table, acc, rows, kh, wq, groups, sw, dw, out_h, out_w, pitch, rq);
  else Rows<false>(table, acc, rows, kh, wq, groups, sw, dw, out_h, out_w, pitch, rq);
}

}  // namespace whittle::cpu::depthwise_avx512vbmi
