// The int8 kernels' AVX-512 table without VNNI (kernels/cpu/isa/qgemm_kernels.h): the 256-bit
// tiles of the AVX2 table, the quantized epilogue and the depthwise tap sums on zmm. Compiled
// -mavx512f -mavx512bw -mavx512vl -mfma (CMakeLists.txt).
#include "kernels/cpu/isa/qgemm_avx512_impl.h"
#include "kernels/cpu/isa/qgemm_kernels_impl.h"

namespace whittle::cpu::qgemm_kernels_avx512 {
namespace {

struct Avx512 : qgemm_internal::QDotMaddubs<Avx512>, qgemm_internal::QAvx512Pieces<Avx512> {
  static constexpr bool kAvx512 = true;
};

}  // namespace

const qgemm_internal::QIsaKernels kTable = qgemm_internal::QKernelsImpl<Avx512>::Table("avx512");

}  // namespace whittle::cpu::qgemm_kernels_avx512
