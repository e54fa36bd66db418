// vmath.h on AVX-512F (compiled with -mavx512f -mfma: see CMakeLists.txt; only called when the
// CPU has AVX-512F).
#include "kernels/cpu/isa/avx512.h"
#include "kernels/cpu/vmath.h"

namespace whittle::cpu::vmath_avx512 {

using V = isa::Avx512;  // kernels/cpu/isa/avx512.h

#include "kernels/cpu/vmath_impl.h"  // VMath<V>, and Map, ExpShiftSum, FmaLoop over it

}  // namespace whittle::cpu::vmath_avx512
