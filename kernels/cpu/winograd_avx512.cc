// winograd.h's transforms and GEMMs on AVX-512 (compiled with -mavx512f -mfma: see
// CMakeLists.txt): 16 channels per vector, GEMM tiles of 24 accumulators (12 tiles x 32 channels).
#include "kernels/cpu/isa/avx512.h"
#include "kernels/cpu/winograd.h"

namespace whittle::cpu::winograd_avx512 {
namespace {

struct V : isa::Avx512 {  // kernels/cpu/isa/avx512.h, with this kernel's register budget
  static constexpr int kMaxAcc = 24;
};

}  // namespace

#include "kernels/cpu/winograd_impl.h"

}  // namespace whittle::cpu::winograd_avx512
