// binary_gemm.h on AVX2 (compiled with -mavx2 -mfma -mpopcnt -mno-avx512f: see CMakeLists.txt).
// XorPopcount: a tile of one row of a against C columns of w; per 256-bit vector of XORed words
// the bytes' bit counts come from two vpshufb nibble lookups and are summed as bytes (at most 31
// vectors, 8 per byte each, before they could overflow), then folded into 64-bit lanes by vpsadbw.
#include <immintrin.h>

#include <algorithm>

#include "kernels/common/binary.h"
#include "kernels/cpu/binary_gemm.h"
#include "kernels/cpu/binary_scalar_impl.h"

namespace whittle::cpu::binary_avx2 {
namespace {

inline __m256i PopBytes(__m256i v, __m256i lut, __m256i low) {
  const __m256i lo = _mm256_and_si256(v, low), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
  return _mm256_add_epi8(_mm256_shuffle_epi8(lut, lo), _mm256_shuffle_epi8(lut, hi));
}

inline int64_t Sum64(__m256i v) {
  const __m128i s = _mm_add_epi64(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  return _mm_cvtsi128_si64(s) + _mm_extract_epi64(s, 1);
}

template <int C>
inline void Tile(const uint64_t* a, const uint64_t* w, int64_t words, int32_t* out) {
  const __m256i lut = _mm256_setr_epi8(0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4, 0, 1, 1, 2, 1, 2, 2, 3, 1, 2,
                                       2, 3, 2, 3, 3, 4);
  const __m256i low = _mm256_set1_epi8(0x0f), zero = _mm256_setzero_si256();
  const int64_t nv = words / 4;
  __m256i acc[C];
  for (int c = 0; c < C; ++c) acc[c] = zero;
  for (int64_t v = 0; v < nv;) {
    const int64_t end = std::min<int64_t>(nv, v + 31);
    __m256i bytes[C];
    for (int c = 0; c < C; ++c) bytes[c] = zero;
    for (; v < end; ++v) {
      const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + v * 4));
      for (int c = 0; c < C; ++c) {
        const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + c * words + v * 4));
        bytes[c] = _mm256_add_epi8(bytes[c], PopBytes(_mm256_xor_si256(x, y), lut, low));
      }
    }
    for (int c = 0; c < C; ++c) acc[c] = _mm256_add_epi64(acc[c], _mm256_sad_epu8(bytes[c], zero));
  }
  for (int c = 0; c < C; ++c) {
    int64_t s = Sum64(acc[c]);
    for (int64_t i = nv * 4; i < words; ++i) s += _mm_popcnt_u64(a[i] ^ w[c * words + i]);
    out[c] = static_cast<int32_t>(s);
  }
}

}  // namespace

void XorPopcount(int64_t rows, const uint64_t* a, int64_t lda, const uint64_t* w, int64_t n, int64_t words,
                 int32_t* out, int64_t ldo) {
  // Rows shorter than one vector (a Conv's few words per im2col row): the vector tile's
  // horizontal sums would cost more than the counts; POPCNT per word instead.
  if (words < 4) return XorPopcountRows(rows, a, lda, w, n, words, out, ldo);
  int64_t j = 0;
  for (; j + 4 <= n; j += 4)
    for (int64_t r = 0; r < rows; ++r) Tile<4>(a + r * lda, w + j * words, words, out + r * ldo + j);
  for (; j < n; ++j)
    for (int64_t r = 0; r < rows; ++r) Tile<1>(a + r * lda, w + j * words, words, out + r * ldo + j);
}

double PackSigns(const float* x, int64_t k, uint64_t* out) {
  const __m256 zero = _mm256_setzero_ps(), abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 sum = zero;
  int64_t i = 0;
  for (; i + 64 <= k; i += 64) {
    uint64_t word = 0;
    for (int q = 0; q < 8; ++q) {
      const __m256 v = _mm256_loadu_ps(x + i + q * 8);
      word |= static_cast<uint64_t>(_mm256_movemask_ps(_mm256_cmp_ps(v, zero, _CMP_GE_OQ))) << (q * 8);
      sum = _mm256_add_ps(sum, _mm256_and_ps(v, abs_mask));
    }
    out[i / 64] = word;
  }
  alignas(32) float t[8];
  _mm256_store_ps(t, sum);
  double s = 0;
  for (float f : t) s += f;
  if (i < k) s += whittle::PackSigns(x + i, k - i, out + i / 64);
  return s;
}

void DecodeSignPanel(const uint32_t* masks, int64_t K, const float* alpha, float* out) {
  const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  const __m256 a0 = _mm256_loadu_ps(alpha), a1 = _mm256_loadu_ps(alpha + 8);
  const __m256 sign = _mm256_set1_ps(-0.f);
  const __m256 n0 = _mm256_xor_ps(a0, sign), n1 = _mm256_xor_ps(a1, sign);
  for (int64_t k = 0; k < K; ++k) {
    const __m256i lo = _mm256_set1_epi32(static_cast<int>(masks[k] & 0xff));
    const __m256i hi = _mm256_set1_epi32(static_cast<int>((masks[k] >> 8) & 0xff));
    const __m256 s0 = _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(lo, bit), bit));
    const __m256 s1 = _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(hi, bit), bit));
    _mm256_storeu_ps(out + k * 16, _mm256_blendv_ps(n0, a0, s0));
    _mm256_storeu_ps(out + k * 16 + 8, _mm256_blendv_ps(n1, a1, s1));
  }
}

}  // namespace whittle::cpu::binary_avx2
