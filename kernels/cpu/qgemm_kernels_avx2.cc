// The int8 kernels' AVX2 table (kernels/cpu/isa/qgemm_kernels.h). Compiled -mavx2 -mfma
// -mno-avx512f (CMakeLists.txt). vpmaddubsw sums byte pairs in int16 first: the byte kernels are
// exact only for weights that Q8WeightsFit accepts.
#include "kernels/cpu/isa/qgemm_kernels_impl.h"

namespace whittle::qgemm_internal {
namespace {

struct Avx2 {
  static constexpr bool kExactBytes = false, kAvx512 = false;
  static inline __m256i DotBytes(__m256i c, __m256i u, __m256i s) {
    const __m256i pairs = _mm256_maddubs_epi16(u, s);  // exact under Q8WeightsFit
    return _mm256_add_epi32(c, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
  }
  static inline __m256i MulAddPairs(__m256i c, __m256i a, __m256i b) {
    return _mm256_add_epi32(c, _mm256_madd_epi16(a, b));
  }
};

}  // namespace

const QIsaKernels kQKernelsAvx2 = QKernelsImpl<Avx2>::Table("avx2");

}  // namespace whittle::qgemm_internal
