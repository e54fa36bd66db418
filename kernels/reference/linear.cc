#include "kernels/reference/linear.h"

#include <string>
#include <type_traits>

namespace whittle::reference {
namespace {

// Accumulator: double for floating types, 64-bit of the same signedness for integers.
template <class T>
using Acc = std::conditional_t<std::is_floating_point_v<T>, double,
                               std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>;

// Calls f(T{}) for the element type t (one the family's attribute check accepted).
template <class F>
void Dispatch(DType t, F&& f) {
  switch (t) {
    case DType::kFloat32: f(float{}); break;
    case DType::kFloat64: f(double{}); break;
    case DType::kInt32: f(int32_t{}); break;
    case DType::kInt64: f(int64_t{}); break;
    case DType::kUInt32: f(uint32_t{}); break;
    case DType::kUInt64: f(uint64_t{}); break;
    default: WH_CHECK(false && "unsupported linear dtype");
  }
}

template <class T>
void GemmRef(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const T* A, const T* B, float beta,
             const T* C, GemmBias cb, T* Y) {
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      Acc<T> acc = 0;
      for (int64_t k = 0; k < K; ++k) {
        const T a = ta ? A[k * M + i] : A[i * K + k];
        const T b = tb ? B[j * K + k] : B[k * N + j];
        acc += static_cast<Acc<T>>(a) * static_cast<Acc<T>>(b);
      }
      const Acc<T> c = C ? static_cast<Acc<T>>(C[i * cb.row_step + j * cb.col_step]) : Acc<T>(0);
      if (alpha == 1.f && beta == 1.f) Y[i * N + j] = static_cast<T>(acc + c);
      else Y[i * N + j] = static_cast<T>(static_cast<double>(alpha) * static_cast<double>(acc) +
                                         static_cast<double>(beta) * static_cast<double>(c));
    }
  }
}

class GemmReferenceKernel : public OpKernel {
 public:
  explicit GemmReferenceKernel(const GemmAttrs& a)
      : ta_(a.trans_a), tb_(a.trans_b), alpha_(a.alpha), beta_(a.beta), act_(a.act) {}

  Status Compute(KernelContext& ctx) const override {
    const Tensor& a = *ctx.inputs[0];
    const Tensor& b = *ctx.inputs[1];
    const Tensor* c = ctx.inputs.size() > 2 ? ctx.inputs[2] : nullptr;
    int64_t M, N, K;
    WH_RETURN_IF_ERROR(ResolveGemmDims(a.dims(), b.dims(), ta_, tb_, &M, &N, &K));
    if (b.dtype() != a.dtype() || (c && c->dtype() != a.dtype()))
      return InvalidArgument("Gemm inputs must share one element type");
    GemmBias cb;
    if (c) {
      WH_ASSIGN_OR_RETURN(cb, GemmBias::Resolve(c->dims(), M, N));
    }
    Tensor& y = *ctx.outputs[0];
    if (y.numel() != M * N) return Internal("Gemm output " + DimsToString(y.dims()) + " is not [M, N]");
    Dispatch(a.dtype(), [&](auto tag) {
      using T = decltype(tag);
      GemmRef<T>(ta_, tb_, M, N, K, alpha_, a.data<T>(), b.data<T>(), beta_, c ? c->data<T>() : nullptr, cb,
                 y.data<T>());
    });
    if (a.dtype() == DType::kFloat32) act_.Apply(y.data<float>(), y.numel());
    return Status::Ok();
  }

 private:
  bool ta_, tb_;
  float alpha_, beta_;
  FusedActivation act_;
};

template <class T>
void MatMulRef(const MatMulPlan& p, const T* A, const T* B, T* Y) {
  for (int64_t bi = 0; bi < p.batch; ++bi) {
    int64_t am, bm;
    p.Offsets(bi, &am, &bm);
    const T* a = A + am * p.M * p.K;
    const T* b = B + bm * p.K * p.N;
    T* y = Y + bi * p.M * p.N;
    for (int64_t i = 0; i < p.M; ++i)
      for (int64_t j = 0; j < p.N; ++j) {
        Acc<T> acc = 0;
        for (int64_t k = 0; k < p.K; ++k) acc += static_cast<Acc<T>>(a[i * p.K + k]) * static_cast<Acc<T>>(b[k * p.N + j]);
        y[i * p.N + j] = static_cast<T>(acc);
      }
  }
}

class MatMulReferenceKernel : public OpKernel {
 public:
  explicit MatMulReferenceKernel(const MatMulAttrs& a) : act_(a.act) {}

  Status Compute(KernelContext& ctx) const override {
    const Tensor& a = *ctx.inputs[0];
    const Tensor& b = *ctx.inputs[1];
    if (b.dtype() != a.dtype()) return InvalidArgument("MatMul inputs must share one element type");
    MatMulPlan p;
    WH_RETURN_IF_ERROR(p.Resolve(a.dims(), b.dims()));
    Tensor& y = *ctx.outputs[0];
    if (y.dims() != p.out_dims)
      return Internal("MatMul output " + DimsToString(y.dims()) + " differs from " + DimsToString(p.out_dims));
    Dispatch(a.dtype(), [&](auto tag) {
      using T = decltype(tag);
      MatMulRef<T>(p, a.data<T>(), b.data<T>(), y.data<T>());
    });
    if (a.dtype() == DType::kFloat32) act_.Apply(y.data<float>(), y.numel());
    return Status::Ok();
  }

 private:
  FusedActivation act_;
};

KernelOr MakeGemm(const GemmAttrs& a, const KernelInit&) {
  return std::unique_ptr<OpKernel>(std::make_unique<GemmReferenceKernel>(a));
}

KernelOr MakeMatMul(const MatMulAttrs& a, const KernelInit&) {
  return std::unique_ptr<OpKernel>(std::make_unique<MatMulReferenceKernel>(a));
}

}  // namespace

const LinearFns kLinearFns{&MakeGemm, &MakeMatMul};

}  // namespace whittle::reference
