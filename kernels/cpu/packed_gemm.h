// Float GEMM against a constant right-hand matrix packed once at load: C[M,N] = A[M,K] · B[K,N]
// (+ bias[N], then Relu when asked), for Gemm and MatMul nodes whose B is an initializer (the
// weights of every Linear layer). B is stored as column panels of kNr floats ([K][kNr] each,
// zero-padded past N) for the ISA in use, so a call packs nothing — oneDNN's dnnl_sgemm packs B
// on every call, which at batch 1-64 is a sizeable share of the work. Register tiles of up to
// 12 rows (24 accumulators; 6 rows on AVX2, 12 of its 16 registers) x one panel read each packed
// B row once per tile, prefetching it 16 k-steps ahead; 1-2 row tiles span 2-4 panels so the FMA
// chains stay independent. (12 rows against 8 and the prefetch: a [50,3072]x[3072,768] MatMul,
// ViT-B/32's MLP at batch 1, 2.1 -> 1.7 ms; [16,3072]x[3072,768] 0.80 -> 0.59 ms; ONNX Runtime
// 1.64 and 0.59; Xeon family 6 model 167 (lscpu; AVX-512 + AMX), 1 thread.) Per-ISA tiles live
// in packed_gemm_avx2.cc and packed_gemm_avx512.cc (packed_gemm_impl.h), picked by
// ActiveSimdIsa() when B is packed.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/aligned.h"
#include "kernels/cpu/vmath.h"

namespace whittle::cpu {

class PackedGemmB {
 public:
  PackedGemmB() = default;
  // B as stored: [K, N] row-major, or [N, K] when trans (PyTorch's Linear weight). isa is capped
  // by ActiveSimdIsa(); scalar means no packed path (Valid() is false).
  PackedGemmB(const float* b, bool trans, int64_t K, int64_t N, SimdIsa isa = ActiveSimdIsa());

  bool Valid() const { return !data_.empty(); }
  int64_t K() const { return k_; }
  int64_t N() const { return n_; }
  SimdIsa isa() const { return isa_; }

  // C[i, :] = A[i, :] · B (+ bias) (then max(., 0) when relu) for i < M; A rows lda apart, C
  // rows ldc apart; bias null or N floats. Splits (row tile, panel) tasks over `threads`.
  void Multiply(int64_t M, const float* A, int64_t lda, float* C, int64_t ldc, const float* bias, bool relu,
                int threads) const;

 private:
  static constexpr int64_t kGroup = 4;  // panels per task; PackedGemmPanelsPerTile(r) divides it
  int64_t k_ = 0, n_ = 0, nr_ = 0, panels_ = 0;
  SimdIsa isa_ = SimdIsa::kScalar;
  AlignedVector<float> data_;  // panels_ x [K][nr_]
};

// Per-ISA tiles: C rows [0, rows) x columns [0, ncols) of np consecutive panels starting at bp
// (panels panel_stride floats apart); rows <= kMaxRows, np <= PackedGemmPanelsPerTile(rows),
// np*kNr >= ncols. Defined in packed_gemm_avx2.cc / packed_gemm_avx512.cc.
namespace packed_gemm_avx2 {
constexpr int kNr = 16, kMaxRows = 6;
void Tile(int rows, int np, int64_t K, const float* a, int64_t lda, const float* bp, int64_t panel_stride, float* c,
          int64_t ldc, int64_t ncols, const float* bias, bool relu);
}  // namespace packed_gemm_avx2
namespace packed_gemm_avx512 {
constexpr int kNr = 32, kMaxRows = 12;
void Tile(int rows, int np, int64_t K, const float* a, int64_t lda, const float* bp, int64_t panel_stride, float* c,
          int64_t ldc, int64_t ncols, const float* bias, bool relu);
}  // namespace packed_gemm_avx512

// Whether Gemm/MatMul kernels with constant weights use this path: by PackedGemmPreferred
// (kAuto, the default), or pinned by WHITTLE_GEMM=packed (kAlways) or =eigen|onednn (kNever).
// SetPackedGemmUse (tests) overrides the environment; kAuto restores it.
enum class PackedGemmUse { kAuto, kAlways, kNever };
PackedGemmUse PackedGemmPolicy();
void SetPackedGemmUse(PackedGemmUse use);

// The rule kAuto follows, from tests/bench/gemm_bench.cc (be 3 against be 2, AVX-512 and AVX2):
// packed where N fills at least half an AVX-512 panel (16 columns; on AVX2 half its own, 8, from
// 2 rows on: a single row of a narrow head is Eigen's GEMV, faster there) and M <= 256 (1.0-1.8x
// at the MLP's batch 1 and 64 and the transformer's batch 1; oneDNN's blocking is 1-7% ahead
// from M = 1024, and a narrow N leaves most of each panel empty). A fixed rule rather than a timing, so that every process
// computes a model's outputs with the same kernels, bit for bit.
bool PackedGemmPreferred(int64_t M, int64_t N);

// How many panels a tile of `rows` rows spans (kept in one place for the tiles and the caller).
constexpr int PackedGemmPanelsPerTile(int rows) { return rows == 1 ? 4 : rows == 2 ? 2 : 1; }

}  // namespace whittle::cpu
