// packed_gemm.h's tiles on AVX2 + FMA (compiled with -mavx2 -mfma -mno-avx512f: see CMakeLists.txt).
#include "kernels/cpu/isa/avx2.h"
#include "kernels/cpu/packed_gemm.h"

namespace whittle::cpu::packed_gemm_avx2 {
namespace {

using V = isa::Avx2;  // kernels/cpu/isa/avx2.h

#include "kernels/cpu/packed_gemm_impl.h"

}  // namespace

void Tile(int rows, int np, int64_t K, const float* a, int64_t lda, const float* bp, int64_t panel_stride, float* c,
          int64_t ldc, int64_t ncols, const float* bias, bool relu) {
  static_assert(kNr == 2 * V::kWidth, "panel width");
  TileDispatch<2, kMaxRows>(rows, np, K, a, lda, bp, panel_stride, c, ldc, ncols, bias, relu);
}

}  // namespace whittle::cpu::packed_gemm_avx2
