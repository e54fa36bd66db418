// binary_gemm.h's XorPopcount with the POPCNT instruction (compiled with -mpopcnt: see CMakeLists.txt).
#include "kernels/cpu/binary_gemm.h"
#include "kernels/cpu/binary_scalar_impl.h"

namespace whittle::cpu::binary_popcnt {

void XorPopcount(int64_t rows, const uint64_t* a, int64_t lda, const uint64_t* w, int64_t n, int64_t words,
                 int32_t* out, int64_t ldo) {
  XorPopcountRows(rows, a, lda, w, n, words, out, ldo);
}

}  // namespace whittle::cpu::binary_popcnt
