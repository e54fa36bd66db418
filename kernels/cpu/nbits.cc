// CPU kernel of com.microsoft MatMulNBits (4-bit codes). The weights stay as the model stores them
// (B [N][blocks][block/2] bytes, scales, zero points): nothing is repacked or expanded at load.
// Few rows of A (decode: 1 token per step; a short prompt; up to kGemvRows): A is laid out once in
// the order the per-ISA loop reads it (nbits_rows.h) with its per-block sums, then threads take
// slices of N and stream their codes once per 4 rows of A: y[n] = sum_j s[n,j] (a_j . q_nj) -
// zterm(n), zterm(n) = sum_j s[n,j] zp[n,j] sum(a_j). More rows (prefill, batches): a thread dequantizes a
// tile of kTile rows of W into a buffer of its own and multiplies it with Sgemm, so the float
// matrix exists only a tile at a time. Without AVX2 there is no fast path (the reference runs).
#include "kernels/cpu/nbits.h"

#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <memory>
#include <vector>

#include "kernels/cpu/isa/features.h"
#include "kernels/cpu/nbits_rows.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/sgemm.h"
#include "kernels/cpu/vmath.h"

namespace whittle {
namespace cpu {
namespace {

constexpr int64_t kGemvRows = 32;  // rows of A up to which the fused row loop runs
constexpr int64_t kRowChunk = 64;  // rows of W per task in the row loop
constexpr int64_t kTile = 16;      // rows of W per dequantized tile

class NBitsKernel : public OpKernel {
 public:
  NBitsKernel(const NBitsAttrs& a, const NBitsWeights& w, std::vector<Tensor> keep, SimdIsa isa, bool mapped)
      : a_(a), w_(w), keep_(std::move(keep)) {
    // Codes and scales mapped from the model's file (external data) are streamed once per token
    // through 4 KiB file pages: copied into memory advised for 2 MiB pages (THP) they cost a TLB
    // entry per 2 MiB instead, and decode runs 1.1-1.5x faster on the 1B decoder (measured
    // 57-92 ms per token mapped, 58-64 copied); the session then gives the mapped pages back, so
    // the process still holds one copy. Weights read into memory at load stay where they are.
    if (mapped) {
      codes_ = HugeCopy(w.b, static_cast<size_t>(a.N * a.row_bytes()));
      scales_ = HugeCopy(w.scales, static_cast<size_t>(a.N * a.blocks()) * sizeof(float));
      w_.b = static_cast<const uint8_t*>(codes_.get());
      w_.scales = static_cast<const float*>(scales_.get());
    }
    const bool wide = isa == SimdIsa::kAvx512 && a.block % (2 * nbits_avx512::kLanes) == 0;
    lanes_ = wide ? nbits_avx512::kLanes : nbits_avx2::kLanes;
    rows_ = wide ? &nbits_avx512::DotRows : &nbits_avx2::DotRows;
    int8_ = a.accuracy_level == 4 && isa == SimdIsa::kAvx512 && CpuFeatures().avx512vnni;
    // Packed 4-bit zero points as one byte per block (1/32 byte per weight at block 32), the
    // form the per-ISA loop reads 16 at a time; float zero points are read as the model has them.
    if (w.zp_packed) {
      const int64_t nb = a.blocks();
      zp8_.resize(static_cast<size_t>(a.N * nb));
      for (int64_t n = 0; n < a.N; ++n)
        for (int64_t j = 0; j < nb; ++j) zp8_[static_cast<size_t>(n * nb + j)] = static_cast<uint8_t>(w.ZeroPoint(a, n, j));
    }
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor& A = *ctx.inputs[0];
    if (A.dtype() != DType::kFloat32 || A.rank() < 1 || A.dim(A.rank() - 1) != a_.K)
      return InvalidArgument("MatMulNBits: A must be float32 [..., " + std::to_string(a_.K) + "], got " +
                             DimsToString(A.dims()));
    const int64_t M = A.numel() / a_.K;
    const float* pa = A.data<float>();
    float* py = ctx.outputs[0]->data<float>();
    if (M <= kGemvRows && int8_) {
      FusedRowsQ8(pa, M, py, ctx.num_threads);
    } else if (M <= kGemvRows) {
      FusedRows(pa, M, py, ctx.num_threads);
    } else {
      TileLoop(pa, M, py, ctx.num_threads);
    }
    return Status::Ok();
  }

 private:
  // Y[M, N] for a few rows of A: each row laid out once (nbits_rows.h) with its per-block sums;
  // threads take slices of N, and each slice's codes are read once per 4 rows of A.
  void FusedRows(const float* A, int64_t M, float* Y, int threads) const {
    const int64_t nb = a_.blocks(), L = lanes_, lda = nb * a_.block;
    std::vector<float> perm(static_cast<size_t>(M * lda), 0.f), asum(static_cast<size_t>(M * nb), 0.f);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t k = 0; k < a_.K; ++k) {
        const int64_t g = k / (2 * L), i = k % (2 * L);
        const float v = A[m * a_.K + k];
        perm[static_cast<size_t>(m * lda + g * 2 * L + (i & 1) * L + i / 2)] = v;
        asum[static_cast<size_t>(m * nb + k / a_.block)] += v;
      }
    ForSlices<NBitsRowsArgs>(M, Y, threads, [&](NBitsRowsArgs& x, int64_t m0, float* out) {
      x.a_perm = perm.data() + m0 * lda;
      x.lda = lda;
      x.asum = asum.data() + m0 * nb;
      rows_(x, out, a_.N);
    });
  }

  // The same with int8 activations (accuracy_level 4 on AVX-512 VNNI): each row of A quantized per
  // block, symmetric (scale max|a| / 127, round to nearest even), laid out as nbits_rows.h's
  // NBitsQ8Args says; the codes then multiply them as bytes.
  void FusedRowsQ8(const float* A, int64_t M, float* Y, int threads) const {
    const int64_t nb = a_.blocks(), rb = a_.row_bytes(), chunks = (rb + 63) / 64, lda = chunks * 128,
                  ldsa = chunks * 16, bb = a_.block / 2;
    std::vector<int8_t> qa(static_cast<size_t>(M * lda), 0);
    std::vector<float> sa(static_cast<size_t>(M * ldsa), 0.f), asum(static_cast<size_t>(M * nb), 0.f);
    std::vector<float> scale(static_cast<size_t>(nb));
    for (int64_t m = 0; m < M; ++m) {
      const float* a = A + m * a_.K;
      int8_t* q = qa.data() + m * lda;
      for (int64_t j = 0; j < nb; ++j) {
        const int64_t k0 = j * a_.block, k1 = std::min(a_.K, k0 + a_.block);
        float amax = 0.f;
        for (int64_t k = k0; k < k1; ++k) amax = std::max(amax, std::fabs(a[k]));
        const float inv = amax > 0.f ? 127.f / amax : 0.f;
        int32_t sum = 0;
        for (int64_t k = k0; k < k1; ++k) {
          const auto v = static_cast<int32_t>(std::nearbyint(std::min(127.f, std::max(-127.f, a[k] * inv))));
          sum += v;
          // Code byte k / 2: chunk (k / 2) / 64, byte (k / 2) % 64; even k in the low half.
          const int64_t byte = k / 2;
          q[(byte / 64) * 128 + (k & 1) * 64 + byte % 64] = static_cast<int8_t>(v);
        }
        scale[static_cast<size_t>(j)] = amax / 127.f;
        asum[static_cast<size_t>(m * nb + j)] = scale[static_cast<size_t>(j)] * static_cast<float>(sum);
      }
      float* sl = sa.data() + m * ldsa;
      for (int64_t byte = 0; byte < rb; byte += 4) sl[byte / 4] = scale[static_cast<size_t>(byte / bb)];
    }
    ForSlices<NBitsQ8Args>(M, Y, threads, [&](NBitsQ8Args& x, int64_t m0, float* out) {
      x.qa = qa.data() + m0 * lda;
      x.lda = lda;
      x.sa_lanes = sa.data() + m0 * ldsa;
      x.ldsa = ldsa;
      x.asum = asum.data() + m0 * nb;
      nbits_avx512vnni::DotRowsQ8(x, out, a_.N);
    });
  }

  // The fused-row loops' threading: tasks take kRowChunk rows of W (their NBitsWeightRows), then
  // A in groups of up to 4 rows (mr), whose fields set_a fills before it runs the group into out
  // (Y's columns n0.. of row m0); the bias is added per task.
  template <class Args, class SetA>
  void ForSlices(int64_t M, float* Y, int threads, const SetA& set_a) const {
    const int64_t nb = a_.blocks(), tasks = (a_.N + kRowChunk - 1) / kRowChunk;
    ParallelFor(tasks, threads, [&](int64_t c) {
      const int64_t n0 = c * kRowChunk, rows = std::min(kRowChunk, a_.N - n0);
      for (int64_t m0 = 0; m0 < M; m0 += 4) {
        Args x;
        x.b = w_.b + n0 * a_.row_bytes();
        x.row_bytes = a_.row_bytes();
        x.scales = w_.scales + n0 * nb;
        x.zp8 = zp8_.empty() ? nullptr : zp8_.data() + n0 * nb;
        x.zf = w_.zp_float ? w_.zp_float + n0 * nb : nullptr;
        x.zdefault = static_cast<float>(1 << (a_.bits - 1));
        x.nb = nb;
        x.block = a_.block;
        x.rows = rows;
        x.mr = static_cast<int>(std::min<int64_t>(4, M - m0));
        set_a(x, m0, Y + m0 * a_.N + n0);
      }
      AddBias(Y, M, n0, rows);
    });
  }

  void AddBias(float* Y, int64_t M, int64_t n0, int64_t rows) const {
    if (w_.bias)
      for (int64_t m = 0; m < M; ++m)
        for (int64_t r = 0; r < rows; ++r) Y[m * a_.N + n0 + r] += w_.bias[n0 + r];
  }

  // Y[M, N] for many rows: tiles of W dequantized per task, multiplied with Sgemm.
  void TileLoop(const float* A, int64_t M, float* Y, int threads) const {
    const int64_t nb = a_.blocks(), K = a_.K;
    const int64_t tiles = (a_.N + kTile - 1) / kTile;
    ParallelFor(tiles, threads, [&](int64_t t) {
      thread_local std::vector<float> tile;
      const int64_t n0 = t * kTile, rows = std::min(kTile, a_.N - n0);
      tile.resize(static_cast<size_t>(kTile * K));
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t n = n0 + r;
        const uint8_t* codes = w_.b + n * a_.row_bytes();
        float* dst = tile.data() + r * K;
        for (int64_t j = 0; j < nb; ++j) {
          const float s = w_.scales[n * nb + j], z = w_.ZeroPoint(a_, n, j);
          const int64_t k0 = j * a_.block, k1 = std::min(K, k0 + a_.block);
          for (int64_t k = k0; k < k1; ++k) {
            const int code = (codes[k >> 1] >> ((k & 1) * 4)) & 0xF;
            dst[k] = (static_cast<float>(code) - z) * s;
          }
        }
      }
      Sgemm(false, true, M, rows, K, 1.f, A, K, tile.data(), K, 0.f, Y + n0, a_.N, 1);
      AddBias(Y, M, n0, rows);
    });
  }

  NBitsAttrs a_;
  NBitsWeights w_;
  // A copy of `bytes` at src in memory advised for transparent huge pages.
  struct FreeDeleter {
    void operator()(void* p) const { std::free(p); }
  };
  using HugeBuffer = std::unique_ptr<void, FreeDeleter>;
  static HugeBuffer HugeCopy(const void* src, size_t bytes) {
    constexpr size_t kHuge = size_t{2} << 20;
    const size_t rounded = (bytes + kHuge - 1) / kHuge * kHuge;
    void* p = std::aligned_alloc(kHuge, rounded == 0 ? kHuge : rounded);
    if (!p) throw std::bad_alloc();
    ::madvise(p, rounded, MADV_HUGEPAGE);  // a hint: without THP the copy is plain memory
    std::memcpy(p, src, bytes);
    return HugeBuffer(p);
  }

  std::vector<Tensor> keep_;  // the constant operands w_ points into
  HugeBuffer codes_, scales_;
  int64_t lanes_ = 8;
  bool int8_ = false;  // accuracy_level 4 on a CPU with AVX512-VNNI: FusedRowsQ8
  NBitsRowsFn rows_ = nullptr;
  std::vector<uint8_t> zp8_;  // packed zero points, one byte per block
};

KernelOr Make(const NBitsAttrs& a, const KernelInit& init) {
  const SimdIsa isa = ActiveSimdIsa();
  if (isa == SimdIsa::kScalar || a.bits != 4) return KernelOr(nullptr);
  auto c = [&](size_t i) { return init.const_inputs.size() > i ? init.const_inputs[i] : nullptr; };
  auto present = [&](size_t i) {
    return init.input_dtypes.size() > i && init.input_dtypes[i] != DType::kUndefined;
  };
  // Only constant weights (every model that carries MatMulNBits): B, scales, zero points, bias.
  if (!c(1) || !c(2) || (present(3) && !c(3)) || (present(5) && !c(5)) || present(4)) return KernelOr(nullptr);
  WH_ASSIGN_OR_RETURN(NBitsWeights w, CheckNBitsOperands(a, *c(1), *c(2), c(3), nullptr, c(5)));
  std::vector<Tensor> keep;
  for (size_t i : {1, 2, 3, 5})
    if (c(i)) keep.push_back(*c(i));
  const bool mapped = c(1)->buffer()->mapped() || c(2)->buffer()->mapped();
  return std::unique_ptr<OpKernel>(new NBitsKernel(a, w, std::move(keep), isa, mapped));
}

}  // namespace
const NBitsFns kNBitsFns{Make};
}  // namespace cpu
}  // namespace whittle
