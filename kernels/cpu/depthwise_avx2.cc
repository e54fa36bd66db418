// Compiled for AVX2 whatever the build targets (CMakeLists.txt); called only where qlinear.cc found
// the CPU has it.
#include <immintrin.h>

#include "kernels/cpu/depthwise_window.h"

namespace whittle::cpu::depthwise_avx2 {

namespace {

// Windows with the kernel's rows and pairs known at compile time where they are MobileNet's
// (3x3: 3 rows of 2 pairs; 5x5: 5 of 3), so the loops unroll and the shuffles stay in registers;
// kKh = 0 takes them from the arguments.
// With kFused, the sums go through rq's epilogue (Epilogue8's formula and packing) to its bytes.
template <int kKh, int kPairs, bool kFused>
void Rows2(const WindowTable& table, int32_t* acc, const uint8_t* const* rows, int kh_arg, const int32_t* wp,
           int pairs_arg, int64_t sw, int64_t out_h, int64_t out_w, int64_t pitch, const FusedRequant* rq) {
  const int kh = kKh > 0 ? kKh : kh_arg, pairs = kKh > 0 ? kPairs : pairs_arg;
  __m256i shuffle[8], weight[64];
  for (int m = 0; m < pairs; ++m) shuffle[m] = _mm256_load_si256(reinterpret_cast<const __m256i*>(table.shuffle[m]));
  for (int k = 0; k < kh * pairs && k < 64; ++k) weight[k] = _mm256_set1_epi32(wp[k]);
  const int64_t per_row = (out_w + 7) / 8;
  const int64_t rest = out_w - (per_row - 1) * 8;
  const __m256i tail = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int32_t>(rest)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  const __m256i bias = _mm256_set1_epi32(kFused ? rq->bias : 0), zp = _mm256_set1_epi32(kFused ? rq->zp : 0);
  const __m256 mult = _mm256_set1_ps(kFused ? rq->mult : 0.f), lo = _mm256_set1_ps(kFused ? rq->lo : 0.f),
               hi = _mm256_set1_ps(kFused ? rq->hi : 0.f);
  const bool u8 = kFused && rq->u8;
  uint8_t* const y = kFused ? static_cast<uint8_t*>(rq->y) : nullptr;
  for (int64_t oh = 0; oh < out_h; ++oh) {
    int32_t* out = kFused ? nullptr : acc + oh * out_w;
    for (int64_t v = 0; v < per_row; ++v) {
      const int64_t in = oh * pitch + 8 * sw * v;
      __m256i a0 = _mm256_setzero_si256(), a1 = _mm256_setzero_si256();
      for (int i = 0; i < kh; ++i) {
        const uint8_t* p = rows[i] + in;
        const __m256i x = _mm256_inserti128_si256(
            _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))),
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 4 * sw)), 1);
        for (int m = 0; m < pairs; ++m) {
          const __m256i prod = _mm256_madd_epi16(_mm256_shuffle_epi8(x, shuffle[m]), weight[i * pairs + m]);
          if (m % 2 == 0) a0 = _mm256_add_epi32(a0, prod);
          else a1 = _mm256_add_epi32(a1, prod);
        }
      }
      const __m256i a = _mm256_add_epi32(a0, a1);
      if constexpr (kFused) {
        // After the clamp every value fits the output type: the saturating packs change nothing.
        __m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(a, bias)), mult);
        f = _mm256_min_ps(_mm256_max_ps(f, lo), hi);
        const __m256i q = _mm256_add_epi32(_mm256_cvtps_epi32(f), zp);
        const __m128i w16 = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
        const __m128i b8 = u8 ? _mm_packus_epi16(w16, w16) : _mm_packs_epi16(w16, w16);
        uint8_t* dst = y + oh * out_w + 8 * v;
        if (v + 1 < per_row) {
          _mm_storel_epi64(reinterpret_cast<__m128i*>(dst), b8);
        } else {
          alignas(16) uint8_t bytes[16];
          _mm_store_si128(reinterpret_cast<__m128i*>(bytes), b8);
          for (int64_t k = 0; k < rest; ++k) dst[k] = bytes[k];
        }
      } else if (v + 1 < per_row) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 8 * v), a);
      } else {
        _mm256_maskstore_epi32(out + 8 * v, tail, a);
      }
    }
  }
}

}  // namespace

template <bool kFused>
void WindowsOf(const WindowTable& table, int32_t* acc, const uint8_t* const* rows, int kh, const int32_t* wp, int pairs,
                int64_t sw, int64_t out_h, int64_t out_w, int64_t pitch, const FusedRequant* rq) {
  if (kh == 3 && pairs == 2) Rows2<3, 2, kFused>(table, acc, rows, kh, wp, pairs, sw, out_h, out_w, pitch, rq);
  else if (kh == 5 && pairs == 3) Rows2<5, 3, kFused>(table, acc, rows, kh, wp, pairs, sw, out_h, out_w, pitch, rq);
  else Rows2<0, 0, kFused>(table, acc, rows, kh, wp, pairs, sw, out_h, out_w, pitch, rq);
}

void Windows(const WindowTable& table, int32_t* acc, const uint8_t* const* rows, int kh, const int32_t* wp, int pairs,
              int64_t sw, int64_t out_h, int64_t out_w, int64_t pitch, const FusedRequant* rq) {
  if (rq) WindowsOf<true>(table, acc, rows, kh, wp, pairs, sw, out_h, out_w, pitch, rq);
  else WindowsOf<false>(table, acc, rows, kh, wp, pairs, sw, out_h, out_w, pitch, rq);
}

}  // namespace whittle::cpu::depthwise_avx2
