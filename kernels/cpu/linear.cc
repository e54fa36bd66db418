#include "kernels/cpu/linear.h"

#include <algorithm>
#include <string>
#include <vector>

#include "kernels/cpu/packed_gemm.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/sgemm.h"

namespace whittle::cpu {
namespace {

// Below this many multiply-adds a GEMM runs on one thread: OpenMP fork/join costs more.
constexpr int64_t kMinParallelMacs = 1 << 17;

int GemmThreads(int64_t M, int64_t N, int64_t K, int requested) {
  return M * N * K >= kMinParallelMacs ? std::max(1, requested) : 1;
}

// Constant weights go through packed_gemm.h or Sgemm by PackedGemmPolicy() (by default the fixed
// rule PackedGemmPreferred, so every process computes the same floats).
// A weight mapped from external data always takes its packed copy: the session gave the mapped
// pages back after packing (runtime/session/prepare.cc), and Sgemm on the original would map them
// in again, two copies of every weight for any batch over 256 rows (a decoder's prefill, a
// calibration batch: 8.3 GB instead of 4.4 on the 1.1B decoder).
template <class Packed, class Plain>
Status RunPackedOrPlain(int64_t M, int64_t N, bool mapped, const Packed& packed, const Plain& plain) {
  const PackedGemmUse use = PackedGemmPolicy();
  const bool p = use == PackedGemmUse::kAlways ||
                 (use == PackedGemmUse::kAuto && (mapped || PackedGemmPreferred(M, N)));
  return p ? packed() : plain();
}

// A constant 2-D weight captured at load time; `trans` says whether it holds op(B)^T ([N, K]).
// It keeps the model's layout: tests/bench/gemm_bench.cc measured [K, N] and [N, K] within
// noise of each other for the batched MLP shapes (and [N, K], PyTorch's layout, ahead on tiny
// GEMVs), so a load-time transpose would buy nothing.
struct StoredWeight {
  Tensor t;
  bool trans = false;
};

class GemmCpuKernel : public OpKernel {
 public:
  GemmCpuKernel(const GemmAttrs& a, const Tensor* b, const Tensor* c, bool pack)
      : ta_(a.trans_a), tb_(a.trans_b), alpha_(a.alpha), beta_(a.beta), act_(a.act) {
    if (b && b->rank() == 2) w_ = {*b, tb_};
    mapped_ = b && b->defined() && b->buffer()->mapped();
    // A constant C that is the same for every row becomes a pre-scaled bias vector.
    if (c && (c->rank() <= 1 || (c->rank() == 2 && c->dim(0) == 1))) {
      const float* p = c->data<float>();
      row_bias_.resize(static_cast<size_t>(c->numel()));
      for (size_t j = 0; j < row_bias_.size(); ++j) row_bias_[j] = beta_ * p[j];
      has_row_bias_ = true;
    }
    if (pack && w_.t.defined() && !ta_ && alpha_ == 1.f) {
      const int64_t K = tb_ ? b->dim(1) : b->dim(0), N = tb_ ? b->dim(0) : b->dim(1);
      packed_ = PackedGemmB(b->data<float>(), tb_, K, N);
      // The bias the packed tiles add: the row bias as N values (a scalar C spread out).
      if (has_row_bias_ && row_bias_.size() == 1) packed_bias_.assign(static_cast<size_t>(N), row_bias_[0]);
      else if (has_row_bias_ && static_cast<int64_t>(row_bias_.size()) == N) packed_bias_ = row_bias_;
    }
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor& a = *ctx.inputs[0];
    const Tensor& b_in = *ctx.inputs[1];
    const Tensor* c = ctx.inputs.size() > 2 ? ctx.inputs[2] : nullptr;
    int64_t M, N, K;
    WH_RETURN_IF_ERROR(ResolveGemmDims(a.dims(), b_in.dims(), ta_, tb_, &M, &N, &K));
    if (b_in.dtype() != DType::kFloat32 || (c && c->dtype() != DType::kFloat32))
      return InvalidArgument("Gemm inputs must share one element type");
    const bool stored = w_.t.defined();
    const float* B = stored ? w_.t.data<float>() : b_in.data<float>();
    const bool tb = stored ? w_.trans : tb_;
    Tensor& y = *ctx.outputs[0];
    if (y.numel() != M * N) return Internal("Gemm output " + DimsToString(y.dims()) + " is not [M, N]");
    float* Y = y.data<float>();
    const int threads = GemmThreads(M, N, K, ctx.num_threads);
    auto plain = [&] {
      Sgemm(ta_, tb, M, N, K, alpha_, a.data<float>(), ta_ ? M : K, B, tb ? K : N, 0.f, Y, N, threads);
      return Finish(c, Y, M, N);
    };
    if (!stored || !packed_.Valid() || packed_.K() != K || packed_.N() != N) return plain();
    // The tiles add the row bias and apply a Relu; anything else follows as in the plain path.
    const bool tile_bias = c && beta_ != 0.f && !packed_bias_.empty();
    const bool tile_relu = act_.kind == FusedActivation::kRelu && (tile_bias || !c || beta_ == 0.f);
    auto packed = [&] {
      packed_.Multiply(M, a.data<float>(), K, Y, N, tile_bias ? packed_bias_.data() : nullptr, tile_relu, threads);
      if (tile_relu) return Status::Ok();
      if (tile_bias) {
        act_.Apply(Y, M * N);
        return Status::Ok();
      }
      return Finish(c, Y, M, N);
    };
    return RunPackedOrPlain(M, N, mapped_, packed, plain);
  }

 private:
  // After Y = A·B: adds beta·C (a row bias with the activation in the same pass, or any
  // broadcastable C), then the activation.
  Status Finish(const Tensor* c, float* Y, int64_t M, int64_t N) const {
    if (c && beta_ != 0.f) {
      if (has_row_bias_) {
        if (row_bias_.size() != 1 && static_cast<int64_t>(row_bias_.size()) != N)
          return InvalidArgument("Gemm C " + DimsToString(c->dims()) + " does not broadcast to [" +
                                 std::to_string(M) + "," + std::to_string(N) + "]");
        const bool scalar = row_bias_.size() == 1;
        for (int64_t i = 0; i < M; ++i)
          BiasActivationRow(Y + i * N, N, scalar ? row_bias_[0] : 0.f, scalar ? nullptr : row_bias_.data(), act_);
        return Status::Ok();
      }
      WH_ASSIGN_OR_RETURN(GemmBias cb, GemmBias::Resolve(c->dims(), M, N));
      const float* C = c->data<float>();
      for (int64_t i = 0; i < M; ++i) {
        float* row = Y + i * N;
        const float* crow = C + i * cb.row_step;
        if (cb.col_step == 1) {
          for (int64_t j = 0; j < N; ++j) row[j] += beta_ * crow[j];
        } else {
          for (int64_t j = 0; j < N; ++j) row[j] += beta_ * crow[0];
        }
      }
    }
    act_.Apply(Y, M * N);
    return Status::Ok();
  }

  bool ta_, tb_;
  float alpha_, beta_;
  FusedActivation act_;
  StoredWeight w_;
  std::vector<float> row_bias_;
  bool has_row_bias_ = false;
  PackedGemmB packed_;
  std::vector<float> packed_bias_;  // N values, or empty when C is not one row
  bool mapped_ = false;             // the weight's pages are mapped from external data
};

class MatMulCpuKernel : public OpKernel {
 public:
  MatMulCpuKernel(const MatMulAttrs& a, const Tensor* b, bool pack) : act_(a.act) {
    if (b && b->rank() == 2 && b->dtype() == DType::kFloat32) {
      w_ = {*b, false};
      if (pack) packed_ = PackedGemmB(b->data<float>(), false, b->dim(0), b->dim(1));
      mapped_ = b->buffer()->mapped();
    }
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor& a = *ctx.inputs[0];
    const Tensor& b = *ctx.inputs[1];
    if (b.dtype() != DType::kFloat32) return InvalidArgument("MatMul inputs must share one element type");
    Tensor& y = *ctx.outputs[0];
    float* Y = y.data<float>();
    // The bias fused by runtime/rewrite/fuse_matmul_bias: N values added to every row.
    const Tensor* bias_t = ctx.inputs.size() > 2 ? ctx.inputs[2] : nullptr;
    const float* bias = bias_t ? bias_t->data<float>() : nullptr;
    if (bias_t && (bias_t->dtype() != DType::kFloat32 || b.rank() != 2 || bias_t->numel() != b.dim(1)))
      return InvalidArgument("MatMul's fused bias must be float32 with one value per column of B " +
                             DimsToString(b.dims()));
    // B is one matrix (or vector) for every row of A: a single GEMM over all of A's rows.
    if (b.rank() <= 2 && a.rank() >= 1) {
      const int64_t K = a.dim(a.rank() - 1);
      const int64_t N = b.rank() == 2 ? b.dim(1) : 1;
      const int64_t kb = b.dim(0);
      if (kb != K)
        return InvalidArgument("MatMul inner dims differ: A " + DimsToString(a.dims()) + " x B " +
                               DimsToString(b.dims()));
      const int64_t M = K == 0 ? (a.numel() == 0 ? 0 : 1) : a.numel() / K;
      const int64_t rows = K == 0 ? y.numel() / std::max<int64_t>(N, 1) : M;
      if (y.numel() != rows * N) return Internal("MatMul output " + DimsToString(y.dims()) + " is inconsistent");
      const bool stored = w_.t.defined();
      const float* B = stored ? w_.t.data<float>() : b.data<float>();
      const bool tb = stored && w_.trans;
      const int threads = GemmThreads(rows, N, K, ctx.num_threads);
      auto plain = [&] {
        Sgemm(false, tb, rows, N, K, 1.f, a.data<float>(), K, B, tb ? K : N, 0.f, Y, N, threads);
        if (bias) {
          ParallelFor(rows, rows * N >= (int64_t{1} << 14) ? threads : 1,
                      [&](int64_t i) { BiasActivationRow(Y + i * N, N, 0.f, bias, act_); });
        } else {
          act_.Apply(Y, y.numel());
        }
        return Status::Ok();
      };
      if (!stored || !packed_.Valid() || packed_.K() != K || packed_.N() != N || rows == 0) return plain();
      const bool relu = act_.kind == FusedActivation::kRelu;
      auto packed = [&] {
        packed_.Multiply(rows, a.data<float>(), K, Y, N, bias, relu, threads);
        if (!relu) act_.Apply(Y, y.numel());
        return Status::Ok();
      };
      return RunPackedOrPlain(rows, N, mapped_, packed, plain);
    }
    MatMulPlan p;
    WH_RETURN_IF_ERROR(p.Resolve(a.dims(), b.dims()));
    if (y.dims() != p.out_dims)
      return Internal("MatMul output " + DimsToString(y.dims()) + " differs from " + DimsToString(p.out_dims));
    const float* A = a.data<float>();
    const float* B = b.data<float>();
    if (p.b_shared && p.a_contiguous) {
      const int64_t rows = p.batch * p.M;
      Sgemm(false, false, rows, p.N, p.K, 1.f, A, p.K, B, p.N, 0.f, Y, p.N,
            GemmThreads(rows, p.N, p.K, ctx.num_threads));
    } else {
      const int threads = GemmThreads(p.batch * p.M, p.N, p.K, ctx.num_threads);
      const bool across = threads > 1 && p.batch >= threads;
      ParallelFor(p.batch, across ? threads : 1, [&](int64_t i) {
        int64_t am, bm;
        p.Offsets(i, &am, &bm);
        Sgemm(false, false, p.M, p.N, p.K, 1.f, A + am * p.M * p.K, p.K, B + bm * p.K * p.N, p.N, 0.f,
              Y + i * p.M * p.N, p.N, across ? 1 : threads);
      });
    }
    act_.Apply(Y, y.numel());
    return Status::Ok();
  }

 private:
  FusedActivation act_;
  StoredWeight w_;
  PackedGemmB packed_;
  bool mapped_ = false;  // the weight's pages are mapped from external data
};

const Tensor* ConstInput(const KernelInit& init, size_t i) {
  return i < init.const_inputs.size() ? init.const_inputs[i] : nullptr;
}

// Float32 only; other dtypes get an ok null kernel (the reference one is built instead).
KernelOr MakeGemm(const GemmAttrs& a, const KernelInit& init) {
  if (!init.AllFloat32()) return std::unique_ptr<OpKernel>();
  return std::unique_ptr<OpKernel>(std::make_unique<GemmCpuKernel>(a, ConstInput(init, 1), ConstInput(init, 2),
                                                                   init.pack_weights));
}

KernelOr MakeMatMul(const MatMulAttrs& a, const KernelInit& init) {
  if (!init.AllFloat32()) return std::unique_ptr<OpKernel>();
  return std::unique_ptr<OpKernel>(std::make_unique<MatMulCpuKernel>(a, ConstInput(init, 1), init.pack_weights));
}

}  // namespace

const LinearFns kLinearFns{&MakeGemm, &MakeMatMul, nullptr};

}  // namespace whittle::cpu
