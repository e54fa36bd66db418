// nbits_rows.h on AVX2 + FMA: 8 bytes of codes (16 weights) per step, nibbles masked and converted.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/isa/avx2.h"
#include "kernels/cpu/nbits_rows.h"

namespace whittle::cpu::nbits_avx2 {
namespace {

using V = isa::Avx2;  // kernels/cpu/isa/avx2.h

struct Codes {
  static constexpr int kBytes = 8;
  static constexpr int kRowsForOne = 2;
  static void Decode(const uint8_t* p, __m256* lo, __m256* hi) {
    const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    *lo = _mm256_cvtepi32_ps(_mm256_and_si256(v, _mm256_set1_epi32(0xF)));
    *hi = _mm256_cvtepi32_ps(_mm256_srli_epi32(v, 4));
  }
  static __m256 ZeroPoints(const uint8_t* p, int64_t n) {
    uint8_t b[8] = {};
    std::memcpy(b, p, static_cast<size_t>(n));  // n <= 8: never past the row's last zero point
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b))));
  }
};

#include "kernels/cpu/nbits_impl.h"  // ZeroTerm, Tile, Rows, DotRowsImpl over V and Codes

}  // namespace

void DotRows(const NBitsRowsArgs& x, float* out, int64_t ldo) { DotRowsImpl(x, out, ldo); }

}  // namespace whittle::cpu::nbits_avx2
