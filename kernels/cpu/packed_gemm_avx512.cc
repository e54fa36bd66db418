// packed_gemm.h's tiles on AVX-512F (compiled with -mavx512f -mfma: see CMakeLists.txt).
#include "kernels/cpu/isa/avx512.h"
#include "kernels/cpu/packed_gemm.h"

namespace whittle::cpu::packed_gemm_avx512 {
namespace {

using V = isa::Avx512;  // kernels/cpu/isa/avx512.h

#include "kernels/cpu/packed_gemm_impl.h"

}  // namespace

void Tile(int rows, int np, int64_t K, const float* a, int64_t lda, const float* bp, int64_t panel_stride, float* c,
          int64_t ldc, int64_t ncols, const float* bias, bool relu) {
  static_assert(kNr == 2 * V::kWidth, "panel width");
  TileDispatch<2, kMaxRows>(rows, np, K, a, lda, bp, panel_stride, c, ldc, ncols, bias, relu);
}

}  // namespace whittle::cpu::packed_gemm_avx512
