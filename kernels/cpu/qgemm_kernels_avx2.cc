// The int8 kernels' AVX2 table (kernels/cpu/isa/qgemm_kernels.h). Compiled -mavx2 -mfma
// -mno-avx512f (CMakeLists.txt). vpmaddubsw sums byte pairs in int16 first: the byte kernels are
// exact only for weights that Q8WeightsFit accepts.
#include "kernels/cpu/isa/qgemm_kernels_impl.h"

namespace whittle::cpu::qgemm_kernels_avx2 {
namespace {

struct Avx2 : qgemm_internal::QDotMaddubs<Avx2> {
  static constexpr bool kAvx512 = false;
};

}  // namespace

const qgemm_internal::QIsaKernels kTable = qgemm_internal::QKernelsImpl<Avx2>::Table("avx2");

}  // namespace whittle::cpu::qgemm_kernels_avx2
