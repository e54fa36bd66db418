// The int8 kernels' AVX-512 VNNI table (kernels/cpu/isa/qgemm_kernels.h): 256-bit vpdpbusd and
// vpdpwssd tiles (no int16 step: every u8 x s8 product exact; vpdpwssd gives the same bits as
// vpmaddwd + vpaddd), the quantized epilogue and the depthwise tap sums on zmm. Compiled
// -mavx512f -mavx512bw -mavx512vl -mavx512vnni -mfma (CMakeLists.txt).
#include "kernels/cpu/isa/qgemm_avx512_impl.h"
#include "kernels/cpu/isa/qgemm_kernels_impl.h"

namespace whittle::cpu::qgemm_kernels_avx512vnni {
namespace {

struct Avx512Vnni : qgemm_internal::QAvx512Pieces<Avx512Vnni> {
  static constexpr bool kExactBytes = true, kAvx512 = true;
  static inline __m256i DotBytes(__m256i c, __m256i u, __m256i s) { return _mm256_dpbusd_epi32(c, u, s); }
  static inline __m256i MulAddPairs(__m256i c, __m256i a, __m256i b) { return _mm256_dpwssd_epi32(c, a, b); }
};

}  // namespace

const qgemm_internal::QIsaKernels kTable = qgemm_internal::QKernelsImpl<Avx512Vnni>::Table("avx512-vnni");

}  // namespace whittle::cpu::qgemm_kernels_avx512vnni
