// The int8 kernels' AVX-512 table without VNNI (kernels/cpu/isa/qgemm_kernels.h): the 256-bit
// tiles of the AVX2 table, the quantized epilogue and the depthwise tap sums on zmm. Compiled
// -mavx512f -mavx512bw -mavx512vl -mfma (CMakeLists.txt).
#include "kernels/cpu/isa/qgemm_avx512_impl.h"
#include "kernels/cpu/isa/qgemm_kernels_impl.h"

namespace whittle::qgemm_internal {
namespace {

struct Avx512 : QAvx512Pieces<Avx512> {
  static constexpr bool kExactBytes = false, kAvx512 = true;
  static inline __m256i DotBytes(__m256i c, __m256i u, __m256i s) {
    const __m256i pairs = _mm256_maddubs_epi16(u, s);  // exact under Q8WeightsFit
    return _mm256_add_epi32(c, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
  }
  static inline __m256i MulAddPairs(__m256i c, __m256i a, __m256i b) {
    return _mm256_add_epi32(c, _mm256_madd_epi16(a, b));
  }
};

}  // namespace

const QIsaKernels kQKernelsAvx512 = QKernelsImpl<Avx512>::Table("avx512");

}  // namespace whittle::qgemm_internal
