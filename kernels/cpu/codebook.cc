// CPU kernel of ai.whittle CodebookMatMul: W is never expanded whole. At load the indices (a
// constant) are laid out once in the packed GEMM's panel order (kernels/cpu/packed_gemm.h:
// panels of kNr output features, [K][kNr] each), one byte per weight — a quarter of the float
// matrix. Per call a task takes a group of 4 panels, decodes them into a buffer of its own with
// register lookups (codebook_decode.h) and runs the packed GEMM's register tiles over every row
// of A against it. Extra work against the dense packed GEMM: one vectorized decode of W per
// call. Without AVX2 there is no fast path (the reference kernel runs).
#include <algorithm>
#include <memory>
#include <vector>

#include "kernels/cpu/codebook.h"
#include "kernels/cpu/codebook_decode.h"
#include "kernels/cpu/packed_gemm.h"
#include "kernels/cpu/parallel.h"

namespace whittle {
namespace cpu {
namespace {

constexpr int64_t kGroup = 4;  // panels per task

class CodebookKernel : public OpKernel {
 public:
  CodebookKernel(const CodebookAttrs& a, const Tensor& indices, SimdIsa isa) : a_(a), wide_(isa == SimdIsa::kAvx512) {
    nr_ = wide_ ? packed_gemm_avx512::kNr : packed_gemm_avx2::kNr;
    panels_ = (a.n + nr_ - 1) / nr_;
    const int64_t stored = (panels_ + kGroup - 1) / kGroup * kGroup;
    idx_.assign(static_cast<size_t>(stored * a.k * nr_), 0);  // past N: entry 0, never stored
    const uint8_t* p = indices.data<uint8_t>();
    for (int64_t n = 0; n < a.n; ++n) {
      uint8_t* col = idx_.data() + (n / nr_) * a.k * nr_ + n % nr_;
      for (int64_t k = 0; k < a.k; ++k) col[k * nr_] = static_cast<uint8_t>(CodebookIndexAt(p, n * a.k + k, a.bits));
    }
  }

  Status Compute(KernelContext& ctx) const override {
    const int64_t M = ctx.inputs[0]->numel() / a_.k;
    if (M == 0) return Status::Ok();
    const float* A = ctx.inputs[0]->data<float>();
    const float* cb = ctx.inputs[1]->data<float>();
    const int64_t ncb = ctx.inputs[1]->numel();
    const float* b = ctx.inputs.size() > 3 && ctx.inputs[3] ? ctx.inputs[3]->data<float>() : nullptr;
    float* Y = ctx.outputs[0]->data<float>();
    const int max_rows = wide_ ? packed_gemm_avx512::kMaxRows : packed_gemm_avx2::kMaxRows;
    const auto tile = wide_ ? &packed_gemm_avx512::Tile : &packed_gemm_avx2::Tile;
    const auto decode = wide_ ? &codebook_avx512::DecodePanel : &codebook_avx2::DecodePanel;
    const int64_t panel_stride = a_.k * nr_, groups = (panels_ + kGroup - 1) / kGroup;
    ParallelFor(groups, ctx.num_threads, [&](int64_t g) {
      thread_local std::vector<float> buf;
      buf.resize(static_cast<size_t>(kGroup * panel_stride));
      const int64_t used_panels = std::min(kGroup, panels_ - g * kGroup);
      for (int64_t p = 0; p < kGroup; ++p)
        decode(idx_.data() + (g * kGroup + p) * panel_stride, a_.k, cb, ncb, buf.data() + p * panel_stride);
      const int64_t c0 = g * kGroup * nr_;
      for (int64_t r0 = 0; r0 < M; r0 += max_rows) {
        const int rows = static_cast<int>(std::min<int64_t>(max_rows, M - r0));
        const int np = PackedGemmPanelsPerTile(rows);
        for (int64_t p = 0; p < used_panels; p += np) {
          const int64_t col0 = c0 + p * nr_;
          const int64_t ncols = std::min<int64_t>(a_.n - col0, np * nr_);
          const int used = static_cast<int>(std::min<int64_t>(np, used_panels - p));
          tile(rows, used, a_.k, A + r0 * a_.k, a_.k, buf.data() + p * panel_stride, panel_stride, Y + r0 * a_.n + col0,
               a_.n, ncols, b ? b + col0 : nullptr, false);
        }
      }
    });
    return Status::Ok();
  }

 private:
  CodebookAttrs a_;
  bool wide_;
  int64_t nr_ = 0, panels_ = 0;
  std::vector<uint8_t> idx_;  // groups of kGroup panels x [K][nr_], one index per byte
};

KernelOr Make(const CodebookAttrs& a, const KernelInit& init) {
  const SimdIsa isa = ActiveSimdIsa();
  if (isa == SimdIsa::kScalar || init.const_inputs.size() < 3 || !init.const_inputs[2]) return KernelOr(nullptr);
  return std::unique_ptr<OpKernel>(new CodebookKernel(a, *init.const_inputs[2], isa));
}

}  // namespace
const CodebookFns kCodebookFns{Make};
}  // namespace cpu
}  // namespace whittle
