#include "kernels/cpu/packed_gemm.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "kernels/cpu/parallel.h"

namespace whittle::cpu {
namespace {
std::atomic<int> g_use_override{-1};
}  // namespace

PackedGemmUse PackedGemmPolicy() {
  const int o = g_use_override.load(std::memory_order_relaxed);
  if (o >= 0) return static_cast<PackedGemmUse>(o);
  static const PackedGemmUse env = [] {
    const char* v = std::getenv("WHITTLE_GEMM");
    if (!v) return PackedGemmUse::kAuto;
    if (std::strcmp(v, "packed") == 0) return PackedGemmUse::kAlways;
    if (std::strcmp(v, "eigen") == 0 || std::strcmp(v, "onednn") == 0) return PackedGemmUse::kNever;
    return PackedGemmUse::kAuto;
  }();
  return env;
}

void SetPackedGemmUse(PackedGemmUse use) {
  g_use_override.store(use == PackedGemmUse::kAuto ? -1 : static_cast<int>(use), std::memory_order_relaxed);
}

bool PackedGemmPreferred(int64_t M, int64_t N) {
  if (M > 256) return false;
  // An AVX2 panel is 16 columns: from 8 they are half full, and from 2 rows the packed tiles beat
  // Eigen/oneDNN (gemm_bench's heads, N = 10: 1.2-1.4x at M = 32 and 256); a single row stays
  // with Eigen's GEMV, ahead there (1.3-1.6x).
  if (ActiveSimdIsa() == SimdIsa::kAvx2) return N >= 16 || (N >= 8 && M >= 2);
  return N >= 16;
}

PackedGemmB::PackedGemmB(const float* b, bool trans, int64_t K, int64_t N, SimdIsa isa) {
  isa_ = static_cast<int>(isa) <= static_cast<int>(ActiveSimdIsa()) ? isa : ActiveSimdIsa();
  if (isa_ == SimdIsa::kScalar || K <= 0 || N <= 0) return;
  k_ = K;
  n_ = N;
  nr_ = isa_ == SimdIsa::kAvx512 ? packed_gemm_avx512::kNr : packed_gemm_avx2::kNr;
  panels_ = (N + nr_ - 1) / nr_;
  const int64_t stored = (panels_ + kGroup - 1) / kGroup * kGroup;  // whole groups (see Multiply)
  data_.assign(static_cast<size_t>(stored * K * nr_), 0.f);
  for (int64_t p = 0; p < panels_; ++p) {
    float* panel = data_.data() + p * K * nr_;
    const int64_t n0 = p * nr_, cols = std::min(nr_, N - n0);
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < cols; ++j) panel[k * nr_ + j] = trans ? b[(n0 + j) * K + k] : b[k * N + n0 + j];
  }
}

void PackedGemmB::Multiply(int64_t M, const float* A, int64_t lda, float* C, int64_t ldc, const float* bias,
                           bool relu, int threads) const {
  if (M <= 0) return;
  const bool wide = isa_ == SimdIsa::kAvx512;
  const int max_rows = wide ? packed_gemm_avx512::kMaxRows : packed_gemm_avx2::kMaxRows;
  const auto tile = wide ? &packed_gemm_avx512::Tile : &packed_gemm_avx2::Tile;
  const int64_t panel_stride = k_ * nr_;
  // Tasks: (row block of max_rows rows, the last shorter) x (group of kGroup panels), group-major
  // so that consecutive tasks reuse one group of B panels from cache. Within a task a block of r
  // rows steps through its group PanelsPerTile(r) panels at a time (the zero panels that round the
  // count up to a whole group make every step's loads valid; columns past N are not stored).
  const int64_t row_blocks = (M + max_rows - 1) / max_rows;
  const int64_t groups = (panels_ + kGroup - 1) / kGroup;
  ParallelFor(groups * row_blocks, threads, [&](int64_t t) {
    const int64_t g = t / row_blocks, rb = t % row_blocks;
    const int rows = static_cast<int>(std::min<int64_t>(max_rows, M - rb * max_rows));
    const int np = PackedGemmPanelsPerTile(rows);
    const float* a = A + rb * max_rows * lda;
    float* c = C + rb * max_rows * ldc;
    for (int64_t p = g * kGroup; p < (g + 1) * kGroup && p < panels_; p += np) {
      const int64_t col0 = p * nr_;
      const int64_t ncols = std::min<int64_t>(n_ - col0, np * nr_);
      // Only the panels that hold columns (a narrow N leaves the rest of the group zero).
      const int used = static_cast<int>(std::min<int64_t>(np, panels_ - p));
      tile(rows, used, k_, a, lda, data_.data() + p * panel_stride, panel_stride, c + col0, ldc, ncols,
           bias ? bias + col0 : nullptr, relu);
    }
  });
}

}  // namespace whittle::cpu
