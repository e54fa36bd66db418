// MaxPoolGrad's 2x2 stride-2 rows in AVX2 registers (kernels/cpu/pool.h's
// MaxPoolGrad2x2Stride2Row chooses it). Compiled for AVX2 (CMakeLists.txt); called where
// kernels/cpu/isa/features.h says the CPU runs it.
#include <immintrin.h>

#include <algorithm>

#include "kernels/cpu/isa/kernels.h"

namespace whittle::cpu::pool_grad_avx2 {
namespace {

// Lanes [0, k) of a mask (k may be <= 0 or >= 8).
inline __m256i FirstLanes(int64_t k) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(std::clamp<int64_t>(k, 0, 8))),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// t (1..8) windows of MaxPoolGrad2x2Stride2Row; kMasked reads and writes only theirs (t < 8).
template <bool kMasked>
inline void MaxPoolGrad2x2Stride2Block(const float* r0, const float* r1, const float* dy, int64_t t, float* d0,
                                       float* d1) {
  const __m256i lo = kMasked ? FirstLanes(2 * t) : __m256i(), hi = kMasked ? FirstLanes(2 * t - 8) : __m256i();
  auto load = [](const float* p, __m256i mask) { return kMasked ? _mm256_maskload_ps(p, mask) : _mm256_loadu_ps(p); };
  auto store = [](float* p, __m256i mask, __m256 v) {
    if (kMasked)
      _mm256_maskstore_ps(p, mask, v);
    else
      _mm256_storeu_ps(p, v);
  };
  // The deinterleaving shuffles leave the windows in the order 0 1 4 5 2 3 6 7 (dY is permuted to
  // match); the unpacks that re-interleave undo it.
  const __m256 r0lo = load(r0, lo), r0hi = load(r0 + 8, hi), r1lo = load(r1, lo), r1hi = load(r1 + 8, hi);
  const __m256 a = _mm256_shuffle_ps(r0lo, r0hi, _MM_SHUFFLE(2, 0, 2, 0));
  const __m256 b = _mm256_shuffle_ps(r0lo, r0hi, _MM_SHUFFLE(3, 1, 3, 1));
  const __m256 c = _mm256_shuffle_ps(r1lo, r1hi, _MM_SHUFFLE(2, 0, 2, 0));
  const __m256 d = _mm256_shuffle_ps(r1lo, r1hi, _MM_SHUFFLE(3, 1, 3, 1));
  const __m256 g = _mm256_add_ps(  // 0 + dY: -0 becomes +0, as in the adds into zeros
      _mm256_setzero_ps(),
      _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(load(dy, FirstLanes(t))), 0xD8)));
  const __m256 gb = _mm256_cmp_ps(b, a, _CMP_GT_OQ);
  __m256 m = _mm256_blendv_ps(a, b, gb);
  const __m256 gc = _mm256_cmp_ps(c, m, _CMP_GT_OQ);
  m = _mm256_blendv_ps(m, c, gc);
  const __m256 gd = _mm256_cmp_ps(d, m, _CMP_GT_OQ);
  const __m256 row1 = _mm256_or_ps(gc, gd);  // the maximum is in the second row
  const __m256 wa = _mm256_andnot_ps(_mm256_or_ps(gb, row1), g);
  const __m256 wb = _mm256_andnot_ps(row1, _mm256_and_ps(gb, g));
  const __m256 wc = _mm256_andnot_ps(gd, _mm256_and_ps(gc, g));
  const __m256 wd = _mm256_and_ps(gd, g);
  store(d0, lo, _mm256_unpacklo_ps(wa, wb));
  store(d0 + 8, hi, _mm256_unpackhi_ps(wa, wb));
  store(d1, lo, _mm256_unpacklo_ps(wc, wd));
  store(d1 + 8, hi, _mm256_unpackhi_ps(wc, wd));
}

}  // namespace

void MaxPoolGrad2x2Stride2Row(const float* r0, const float* r1, const float* dy, int64_t n, float* d0, float* d1) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    MaxPoolGrad2x2Stride2Block<false>(r0 + 2 * j, r1 + 2 * j, dy + j, 8, d0 + 2 * j, d1 + 2 * j);
  if (j < n) MaxPoolGrad2x2Stride2Block<true>(r0 + 2 * j, r1 + 2 * j, dy + j, n - j, d0 + 2 * j, d1 + 2 * j);
}

}  // namespace whittle::cpu::pool_grad_avx2
