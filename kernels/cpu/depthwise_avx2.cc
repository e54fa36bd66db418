// Compiled for AVX2 whatever the build targets (CMakeLists.txt); called only where qlinear.cc found
// the CPU has it.
#include <immintrin.h>

#include "kernels/cpu/depthwise_window.h"

namespace whittle::cpu::depthwise {
namespace {

// Windows2 with the kernel's rows and pairs known at compile time where they are MobileNet's
// (3x3: 3 rows of 2 pairs; 5x5: 5 of 3), so the loops unroll and the shuffles stay in registers;
// kKh = 0 takes them from the arguments.
template <int kKh, int kPairs>
void Rows2(const WindowTable& table, int32_t* acc, const uint8_t* const* rows, int kh_arg, const int32_t* wp,
           int pairs_arg, int64_t sw, int64_t out_h, int64_t out_w, int64_t pitch) {
  const int kh = kKh > 0 ? kKh : kh_arg, pairs = kKh > 0 ? kPairs : pairs_arg;
  __m256i shuffle[8], weight[64];
  for (int m = 0; m < pairs; ++m) shuffle[m] = _mm256_load_si256(reinterpret_cast<const __m256i*>(table.shuffle[m]));
  for (int k = 0; k < kh * pairs && k < 64; ++k) weight[k] = _mm256_set1_epi32(wp[k]);
  const int64_t per_row = (out_w + 7) / 8;
  const int64_t rest = out_w - (per_row - 1) * 8;
  const __m256i tail = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int32_t>(rest)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  for (int64_t oh = 0; oh < out_h; ++oh) {
    int32_t* out = acc + oh * out_w;
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
      if (v + 1 < per_row) _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 8 * v), a);
      else _mm256_maskstore_epi32(out + 8 * v, tail, a);
    }
  }
}

}  // namespace

void Windows2(const WindowTable& table, int32_t* acc, const uint8_t* const* rows, int kh, const int32_t* wp, int pairs,
              int64_t sw, int64_t out_h, int64_t out_w, int64_t pitch) {
  if (kh == 3 && pairs == 2) Rows2<3, 2>(table, acc, rows, kh, wp, pairs, sw, out_h, out_w, pitch);
  else if (kh == 5 && pairs == 3) Rows2<5, 3>(table, acc, rows, kh, wp, pairs, sw, out_h, out_w, pitch);
  else Rows2<0, 0>(table, acc, rows, kh, wp, pairs, sw, out_h, out_w, pitch);
}

}  // namespace whittle::cpu::depthwise
