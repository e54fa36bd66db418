// The int8 kernels' AVX2 table on CPUs with AVX-VNNI but no AVX-512 (kernels/cpu/isa/
// qgemm_kernels.h). Compiled -mavx2 -mfma -mavxvnni -mno-avx512f (CMakeLists.txt). vpdpbusd and
// vpdpwssd sum in int32 without an int16 step or saturation: the same bits as vpmaddwd + vpaddd,
// and every u8 x s8 product exact.
#include "kernels/cpu/isa/qgemm_kernels_impl.h"

namespace whittle::cpu::qgemm_kernels_vnni_avx2 {
namespace {

struct Avx2Vnni {
  static constexpr bool kExactBytes = true, kAvx512 = false;
  static inline __m256i DotBytes(__m256i c, __m256i u, __m256i s) { return _mm256_dpbusd_avx_epi32(c, u, s); }
  static inline __m256i MulAddPairs(__m256i c, __m256i a, __m256i b) { return _mm256_dpwssd_avx_epi32(c, a, b); }
};

}  // namespace

const qgemm_internal::QIsaKernels kTable = qgemm_internal::QKernelsImpl<Avx2Vnni>::Table("avx2-vnni");

}  // namespace whittle::cpu::qgemm_kernels_vnni_avx2
