// vmath.h on AVX2 + FMA (compiled with -mavx2 -mfma -mno-avx512f: see CMakeLists.txt).
#include "kernels/cpu/isa/avx2.h"
#include "kernels/cpu/vmath.h"

namespace whittle::cpu::vmath_avx2 {

using V = isa::Avx2;  // kernels/cpu/isa/avx2.h

#include "kernels/cpu/vmath_impl.h"  // VMath<V>, and Map, ExpShiftSum, FmaLoop over it

}  // namespace whittle::cpu::vmath_avx2
