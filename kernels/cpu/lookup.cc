#include "kernels/cpu/lookup.h"

#include <atomic>

#include "kernels/cpu/vmath.h"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace whittle::cpu {
namespace lookup_internal {
namespace {
std::atomic<int> g_vector_override{-1};

bool UseVbmi() {
  static const bool supported = __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512bw") &&
                                ActiveSimdIsa() == SimdIsa::kAvx512;
  return supported && g_vector_override.load(std::memory_order_relaxed) != 0;
}

bool UseAvx512() {
  static const bool supported = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                                __builtin_cpu_supports("avx512vl") && ActiveSimdIsa() == SimdIsa::kAvx512;
  return supported && g_vector_override.load(std::memory_order_relaxed) != 0;
}
}  // namespace

void SetLookupVector(int use) { g_vector_override.store(use, std::memory_order_relaxed); }
}  // namespace lookup_internal

void LookupBytes(const uint8_t* x, int64_t n, const uint8_t* table, uint8_t* y) {
  if (lookup_internal::UseVbmi()) return lookup_internal::LookupBytesVbmi(x, n, table, y);
  int64_t i = 0;
#if defined(__AVX2__)
  // Row r of the table (entries 16r .. 16r + 15) by pshufb on the index's low nibble, kept where
  // the high nibble is r.
  __m256i rows[16];
  for (int r = 0; r < 16; ++r)
    rows[r] = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(table + 16 * r)));
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  for (; i + 32 <= n; i += 32) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i));
    const __m256i lo = _mm256_and_si256(v, low4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
    __m256i out = _mm256_setzero_si256();
    for (int r = 0; r < 16; ++r)
      out = _mm256_blendv_epi8(out, _mm256_shuffle_epi8(rows[r], lo), _mm256_cmpeq_epi8(hi, _mm256_set1_epi8(static_cast<char>(r))));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), out);
  }
#endif
  for (; i < n; ++i) y[i] = table[x[i]];
}

void LookupFloats(const uint8_t* x, int64_t n, const float* table, float* y) {
  if (lookup_internal::UseAvx512()) return lookup_internal::LookupFloatsAvx512(x, n, table, y);
  for (int64_t i = 0; i < n; ++i) y[i] = table[x[i]];
}

}  // namespace whittle::cpu
