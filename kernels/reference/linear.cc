#include "kernels/reference/linear.h"

#include <algorithm>
#include <string>
#include <type_traits>

#include "kernels/common/fused_activation.h"

namespace whittle {
namespace {

std::string Str(int64_t v) { return std::to_string(v); }

// Accumulator: double for floating types, 64-bit of the same signedness for integers.
template <class T>
using Acc = std::conditional_t<std::is_floating_point_v<T>, double,
                               std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>;

bool IsLinearType(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kInt32 || t == DType::kInt64 ||
         t == DType::kUInt32 || t == DType::kUInt64;
}

// Calls f(T{}) for the element type t (one of IsLinearType).
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

}  // namespace

Status MatMulPlan::Resolve(const Dims& a, const Dims& b) {
  if (a.empty() || b.empty()) return InvalidArgument("MatMul inputs must have rank >= 1");
  const bool a_vec = a.size() == 1, b_vec = b.size() == 1;
  const Dims ad = a_vec ? Dims{1, a[0]} : a;
  const Dims bd = b_vec ? Dims{b[0], 1} : b;
  const size_t ra = ad.size(), rb = bd.size();
  M = ad[ra - 2];
  K = ad[ra - 1];
  N = bd[rb - 1];
  if (bd[rb - 2] != K)
    return InvalidArgument("MatMul inner dims differ: A " + DimsToString(a) + " x B " + DimsToString(b));
  const size_t nb = std::max(ra, rb) - 2, na = ra - 2, nbb = rb - 2;
  out_batch.assign(nb, 1);
  a_step.assign(nb, 0);
  b_step.assign(nb, 0);
  int64_t a_stride = 1, b_stride = 1, a_count = 1;
  for (size_t k = 0; k < nb; ++k) {
    const size_t i = nb - 1 - k;  // right-aligned batch position
    const int64_t da = k < na ? ad[na - 1 - k] : 1;
    const int64_t db = k < nbb ? bd[nbb - 1 - k] : 1;
    if (da != db && da != 1 && db != 1)
      return InvalidArgument("MatMul batch dims do not broadcast: A " + DimsToString(a) + " x B " + DimsToString(b));
    out_batch[i] = da == 1 ? db : da;
    a_step[i] = da == 1 ? 0 : a_stride;
    b_step[i] = db == 1 ? 0 : b_stride;
    a_stride *= da;
    b_stride *= db;
    a_count *= da;
  }
  batch = 1;
  for (int64_t d : out_batch) batch *= d;
  b_shared = true;
  for (int64_t s : b_step) b_shared = b_shared && s == 0;
  a_contiguous = a_count == batch;
  out_dims.assign(out_batch.begin(), out_batch.end());
  if (!a_vec) out_dims.push_back(M);
  if (!b_vec) out_dims.push_back(N);
  return Status::Ok();
}

void MatMulPlan::Offsets(int64_t i, int64_t* a_mat, int64_t* b_mat) const {
  int64_t ao = 0, bo = 0;
  for (size_t k = out_batch.size(); k-- > 0;) {
    const int64_t idx = i % out_batch[k];
    i /= out_batch[k];
    ao += idx * a_step[k];
    bo += idx * b_step[k];
  }
  *a_mat = ao;
  *b_mat = bo;
}

StatusOr<GemmBias> GemmBias::Resolve(const Dims& c, int64_t M, int64_t N) {
  GemmBias g;
  const std::string err = "Gemm C " + DimsToString(c) + " does not broadcast to [" + Str(M) + "," + Str(N) + "]";
  if (c.size() > 2) return InvalidArgument(err);
  const int64_t cm = c.size() == 2 ? c[0] : 1;
  const int64_t cn = c.empty() ? 1 : c.back();
  if ((cm != 1 && cm != M) || (cn != 1 && cn != N)) return InvalidArgument(err);
  g.row_step = cm == 1 ? 0 : cn;
  g.col_step = cn == 1 ? 0 : 1;
  return g;
}

Status ResolveGemmDims(const Dims& a, const Dims& b, bool trans_a, bool trans_b, int64_t* M, int64_t* N,
                       int64_t* K) {
  if (a.size() != 2 || b.size() != 2)
    return InvalidArgument("Gemm A and B must be 2-D, got " + DimsToString(a) + " and " + DimsToString(b));
  *M = trans_a ? a[1] : a[0];
  *K = trans_a ? a[0] : a[1];
  const int64_t kb = trans_b ? b[1] : b[0];
  *N = trans_b ? b[0] : b[1];
  if (kb != *K)
    return InvalidArgument("Gemm inner dims differ: op(A) is [" + Str(*M) + "," + Str(*K) + "], op(B) is [" +
                           Str(kb) + "," + Str(*N) + "]");
  return Status::Ok();
}

namespace {

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
  GemmReferenceKernel(bool ta, bool tb, float alpha, float beta, FusedActivation act)
      : ta_(ta), tb_(tb), alpha_(alpha), beta_(beta), act_(act) {}

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
  explicit MatMulReferenceKernel(FusedActivation act) : act_(act) {}

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

Status CheckLinearInit(const KernelInit& init, const char* op) {
  const DType dt = init.input_dtypes.empty() ? DType::kUndefined : init.input_dtypes[0];
  if (!IsLinearType(dt))
    return Unimplemented(std::string(op) + " supports float, double, int32, int64, uint32 and uint64, got " +
                         DTypeName(dt));
  if (FusedActivation::FromAttrs(init.attrs).kind != FusedActivation::kNone && dt != DType::kFloat32)
    return Unimplemented(std::string("a fused activation needs float32 ") + op);
  return Status::Ok();
}

}  // namespace

StatusOr<std::unique_ptr<OpKernel>> CreateGemmReferenceKernel(const KernelInit& init) {
  WH_RETURN_IF_ERROR(CheckLinearInit(init, "Gemm"));
  const AttributeMap& a = init.attrs;
  return std::unique_ptr<OpKernel>(std::make_unique<GemmReferenceKernel>(
      a.GetInt("transA", 0) != 0, a.GetInt("transB", 0) != 0, a.GetFloat("alpha", 1.f), a.GetFloat("beta", 1.f),
      FusedActivation::FromAttrs(a)));
}

StatusOr<std::unique_ptr<OpKernel>> CreateMatMulReferenceKernel(const KernelInit& init) {
  WH_RETURN_IF_ERROR(CheckLinearInit(init, "MatMul"));
  return std::unique_ptr<OpKernel>(std::make_unique<MatMulReferenceKernel>(FusedActivation::FromAttrs(init.attrs)));
}

}  // namespace whittle
