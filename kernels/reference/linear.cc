#include "kernels/reference/linear.h"

#include <string>
#include <type_traits>
#include <utility>
#include <vector>

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
    // The bias fused by runtime/rewrite/fuse_matmul_bias (float32, N values on the last dim).
    const Tensor* bias = ctx.inputs.size() > 2 ? ctx.inputs[2] : nullptr;
    if (bias) {
      if (a.dtype() != DType::kFloat32 || bias->dtype() != DType::kFloat32 || bias->numel() != p.N)
        return InvalidArgument("MatMul's fused bias must be float32 with " + std::to_string(p.N) + " values");
      float* yp = y.data<float>();
      for (int64_t i = 0; i < y.numel(); ++i) yp[i] += bias->data<float>()[i % p.N];
    }
    if (a.dtype() == DType::kFloat32) act_.Apply(y.data<float>(), y.numel());
    return Status::Ok();
  }

 private:
  FusedActivation act_;
};

// Plain loop over the full index space: for each output element, the sum over every summed index
// of the product of the operands' elements.
template <class T>
void EinsumRef(const EinsumPlan& p, const std::vector<const T*>& in, T* y) {
  const size_t axes = p.sizes.size(), n_in = in.size();
  int64_t out_size = 1, sum_size = 1;
  for (size_t a = 0; a < axes; ++a) (a < p.out_axes ? out_size : sum_size) *= p.sizes[a];
  std::vector<int64_t> idx(axes, 0);
  for (int64_t o = 0; o < out_size; ++o) {
    int64_t rest = o;
    for (size_t a = p.out_axes; a-- > 0;) {
      idx[a] = rest % p.sizes[a];
      rest /= p.sizes[a];
    }
    Acc<T> acc = 0;
    for (int64_t r = 0; r < sum_size; ++r) {
      rest = r;
      for (size_t a = axes; a-- > p.out_axes;) {
        idx[a] = rest % p.sizes[a];
        rest /= p.sizes[a];
      }
      Acc<T> prod = 1;
      for (size_t i = 0; i < n_in; ++i) {
        int64_t off = 0;
        for (size_t a = 0; a < axes; ++a) off += idx[a] * p.strides[i][a];
        prod *= static_cast<Acc<T>>(in[i][off]);
      }
      acc += prod;
    }
    y[o] = static_cast<T>(acc);
  }
}

class EinsumReferenceKernel : public OpKernel {
 public:
  explicit EinsumReferenceKernel(EinsumAttrs a) : attrs_(std::move(a)) {}

  Status Compute(KernelContext& ctx) const override {
    std::vector<Dims> dims;
    for (const Tensor* t : ctx.inputs) {
      if (!t || t->dtype() != ctx.inputs[0]->dtype())
        return InvalidArgument("Einsum inputs must be present and share one element type");
      dims.push_back(t->dims());
    }
    EinsumPlan p;
    WH_RETURN_IF_ERROR(p.Resolve(attrs_.equation, dims));
    Tensor& y = *ctx.outputs[0];
    if (y.dims() != p.out_dims)
      return Internal("Einsum output " + DimsToString(y.dims()) + " differs from " + DimsToString(p.out_dims));
    Dispatch(ctx.inputs[0]->dtype(), [&](auto tag) {
      using T = decltype(tag);
      std::vector<const T*> in;
      for (const Tensor* t : ctx.inputs) in.push_back(t->data<T>());
      EinsumRef<T>(p, in, y.data<T>());
    });
    return Status::Ok();
  }

 private:
  EinsumAttrs attrs_;
};

KernelOr MakeEinsum(const EinsumAttrs& a, const KernelInit&) {
  return std::unique_ptr<OpKernel>(std::make_unique<EinsumReferenceKernel>(a));
}

KernelOr MakeGemm(const GemmAttrs& a, const KernelInit&) {
  return std::unique_ptr<OpKernel>(std::make_unique<GemmReferenceKernel>(a));
}

KernelOr MakeMatMul(const MatMulAttrs& a, const KernelInit&) {
  return std::unique_ptr<OpKernel>(std::make_unique<MatMulReferenceKernel>(a));
}

}  // namespace

const LinearFns kLinearFns{&MakeGemm, &MakeMatMul, &MakeEinsum};

}  // namespace whittle::reference
