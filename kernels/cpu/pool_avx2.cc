// The max pools' AVX2 rows (kernels/cpu/pool.cc has their scalar twins; max is exact, so both give
// the same values). Compiled for AVX2 (CMakeLists.txt); called where kernels/cpu/isa/features.h
// says the CPU runs it.
#include <immintrin.h>

#include <type_traits>

#include "kernels/cpu/isa/kernels.h"

namespace whittle::cpu::pool_avx2 {
namespace {

// Pairwise max of adjacent unsigned bytes of a and b: 16 results from each, in order a..., b....
inline __m256i PairMaxU8(__m256i a, __m256i b) {
  const __m256i lo = _mm256_set1_epi16(0x00ff);
  const __m256i ma = _mm256_max_epi16(_mm256_and_si256(a, lo), _mm256_srli_epi16(a, 8));
  const __m256i mb = _mm256_max_epi16(_mm256_and_si256(b, lo), _mm256_srli_epi16(b, 8));
  // packus interleaves 128-bit lanes as [a0 b0 | a1 b1]; the permute restores [a0 a1 b0 b1].
  return _mm256_permute4x64_epi64(_mm256_packus_epi16(ma, mb), _MM_SHUFFLE(3, 1, 2, 0));
}

// 8-bit 2x2/stride-2 rows. int8 is mapped onto uint8 order by flipping the sign bit (x ^ 0x80),
// which keeps max exact.
template <typename T>
int64_t MaxRow2x2Int8(const T* r0, const T* r1, int64_t ow, T* out) {
  static_assert(sizeof(T) == 1, "8-bit only");
  int64_t o = 0;
  const __m256i flip = _mm256_set1_epi8(std::is_signed<T>::value ? static_cast<char>(0x80) : 0);
  auto load = [&](const T* p) {
    return _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)), flip);
  };
  for (; o + 32 <= ow; o += 32) {
    const __m256i a = _mm256_max_epu8(load(r0 + 2 * o), load(r1 + 2 * o));
    const __m256i b = _mm256_max_epu8(load(r0 + 2 * o + 32), load(r1 + 2 * o + 32));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + o), _mm256_xor_si256(PairMaxU8(a, b), flip));
  }
  if (o < ow && ow >= 32) {  // the tail as one overlapping vector (same values rewritten)
    o = ow - 32;
    const __m256i a = _mm256_max_epu8(load(r0 + 2 * o), load(r1 + 2 * o));
    const __m256i b = _mm256_max_epu8(load(r0 + 2 * o + 32), load(r1 + 2 * o + 32));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + o), _mm256_xor_si256(PairMaxU8(a, b), flip));
    return ow;
  }
  return o;
}

// Short rows (the CNN's 28 and 14) are covered by two overlapping vectors instead of a scalar
// tail: recomputing an element writes the same value.
template <typename T>
int64_t VerticalMax8(const T* r0, const T* r1, int64_t n, T* d) {
  int64_t i = 0;
  constexpr bool kSigned = std::is_signed<T>::value;
  auto v16 = [&](int64_t j) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(r0 + j));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(r1 + j));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + j), kSigned ? _mm_max_epi8(a, b) : _mm_max_epu8(a, b));
  };
  auto v8 = [&](int64_t j) {
    const __m128i a = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(r0 + j));
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(r1 + j));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(d + j), kSigned ? _mm_max_epi8(a, b) : _mm_max_epu8(a, b));
  };
  if (n >= 16) {
    for (; i + 16 <= n; i += 16) v16(i);
    if (i < n) v16(n - 16);
    return n;
  }
  if (n >= 8) {
    v8(0);
    v8(n - 8);
    return n;
  }
  return 0;
}

}  // namespace

void MaxRow2x2(const float* r0, const float* r1, int64_t ow, float* out) {
  int64_t o = 0;
  for (; o + 8 <= ow; o += 8) {
    const __m256 v0 = _mm256_max_ps(_mm256_loadu_ps(r0 + 2 * o), _mm256_loadu_ps(r1 + 2 * o));
    const __m256 v1 = _mm256_max_ps(_mm256_loadu_ps(r0 + 2 * o + 8), _mm256_loadu_ps(r1 + 2 * o + 8));
    // Pairwise max of even and odd columns; the shuffles leave 128-bit halves as [0 1 4 5 | 2 3 6 7].
    const __m256 m = _mm256_max_ps(_mm256_shuffle_ps(v0, v1, _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm256_shuffle_ps(v0, v1, _MM_SHUFFLE(3, 1, 3, 1)));
    _mm256_storeu_ps(out + o, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(m), _MM_SHUFFLE(3, 1, 2, 0))));
  }
  if (o < ow) {  // the last 1-7 outputs (all of them for small planes) as one masked step
    const int64_t n = 2 * (ow - o);  // input columns left: 2..14
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), idx);
    const __m256i m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n - 8)), idx);
    const __m256 v0 = _mm256_max_ps(_mm256_maskload_ps(r0 + 2 * o, m0), _mm256_maskload_ps(r1 + 2 * o, m0));
    const __m256 v1 = _mm256_max_ps(_mm256_maskload_ps(r0 + 2 * o + 8, m1), _mm256_maskload_ps(r1 + 2 * o + 8, m1));
    const __m256 m = _mm256_max_ps(_mm256_shuffle_ps(v0, v1, _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm256_shuffle_ps(v0, v1, _MM_SHUFFLE(3, 1, 3, 1)));
    const __m256i keep = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(ow - o)), idx);
    _mm256_maskstore_ps(out + o, keep, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(m), _MM_SHUFFLE(3, 1, 2, 0))));
  }
}

int64_t MaxRow2x2U8(const uint8_t* r0, const uint8_t* r1, int64_t ow, uint8_t* out) {
  return MaxRow2x2Int8(r0, r1, ow, out);
}
int64_t MaxRow2x2S8(const int8_t* r0, const int8_t* r1, int64_t ow, int8_t* out) {
  return MaxRow2x2Int8(r0, r1, ow, out);
}
int64_t VerticalMaxU8(const uint8_t* r0, const uint8_t* r1, int64_t n, uint8_t* d) { return VerticalMax8(r0, r1, n, d); }
int64_t VerticalMaxS8(const int8_t* r0, const int8_t* r1, int64_t n, int8_t* d) { return VerticalMax8(r0, r1, n, d); }

}  // namespace whittle::cpu::pool_avx2
