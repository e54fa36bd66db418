// winograd.h's transforms and GEMMs on AVX2 + FMA (compiled with -mavx2 -mfma -mno-avx512f: see
// CMakeLists.txt): 8 channels per vector, GEMM tiles of 12 accumulators (6 tiles x 16 channels).
#include "kernels/cpu/isa/avx2.h"
#include "kernels/cpu/winograd.h"

namespace whittle::cpu::winograd_avx2 {
namespace {

struct V : isa::Avx2 {  // kernels/cpu/isa/avx2.h, with this kernel's register budget
  static constexpr int kMaxAcc = 12;
};

}  // namespace

#include "kernels/cpu/winograd_impl.h"

}  // namespace whittle::cpu::winograd_avx2
