// Kernels of the integer linear ops: ai.whittle QGemm / QConv, QLinearMatMul, QLinearConv,
// MatMulInteger, ConvInteger, DynamicQuantizeLinear. The factory picks init.backend's compute
// functions from kQLinear (reference: the plain loops of kernels/reference/qlinear.h; CPU:
// kernels/cpu/qlinear.h, bit-identical), which may pack constant weights once in the factory.
// Quantization parameters are validated in the factory when they are constants (scale finite
// and > 0, per-axis length = channel count, zero point of the data's type), else on each call;
// errors name the node and the parameter.
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/cpu/qlinear.h"
#include "kernels/kernel.h"
#include "kernels/reference/qlinear.h"

namespace whittle {
namespace {

using Factory = StatusOr<std::unique_ptr<OpKernel>>;

const BackendTable<QLinearFns> kQLinear{{Backend::kReference, &reference::kQLinearFns},
                                        {Backend::kCpu, &cpu::kQLinearFns}};

// Input positions of one op family; -1 where the op has no such input.
struct QInputs {
  int x = 0, x_scale = -1, x_zp = -1, w = 1, w_scale = -1, w_zp = -1, y_scale = -1, y_zp = -1, bias = -1;
  const char* x_name = "x";  // ONNX's names of the two operands, for messages
  const char* w_name = "w";
};
constexpr QInputs kQConvInputs{0, 1, 2, 3, 4, 5, 6, 7, 8, "x", "w"};
constexpr QInputs kQMatMulInputs{0, 1, 2, 3, 4, 5, 6, 7, 8, "a", "b"};
constexpr QInputs kConvIntegerInputs{0, -1, 2, 1, -1, 3, -1, -1, -1, "x", "w"};
constexpr QInputs kMatMulIntegerInputs{0, -1, 2, 1, -1, 3, -1, -1, -1, "a", "b"};

const Tensor* In(const std::vector<const Tensor*>& v, int i) {
  return i >= 0 && static_cast<size_t>(i) < v.size() ? v[static_cast<size_t>(i)] : nullptr;
}

DType InDType(const KernelInit& init, int i) {
  return i >= 0 && static_cast<size_t>(i) < init.input_dtypes.size() ? init.input_dtypes[static_cast<size_t>(i)]
                                                                      : DType::kUndefined;
}

bool IsByte(DType t) { return t == DType::kUInt8 || t == DType::kInt8; }

// Resolved quantization parameters of one call (or of the kernel, when all are constants).
struct QParams {
  std::vector<int32_t> x_zp{0};  // 1, or per row for MatMulInteger's A
  std::vector<int32_t> w_zp{0};  // 1, or per output channel
  QOutput out;
};

// inputs: every input (nullptr when absent); channels: output channels; x_rows: rows that a
// per-row x zero point may have (MatMulInteger only), else -1.
StatusOr<QParams> ResolveQParams(const std::string& node, const QInputs& q, const std::vector<const Tensor*>& inputs,
                                 DType x_dt, DType w_dt, int64_t channels, int64_t x_rows,
                                 const FusedActivation& act) {
  QParams p;
  const std::string xn = q.x_name, wn = q.w_name;
  if (q.x_scale < 0) {  // MatMulInteger / ConvInteger
    WH_ASSIGN_OR_RETURN(p.x_zp, ReadZeroPoints(node, xn + "_zero_point", In(inputs, q.x_zp), x_dt, x_rows));
    WH_ASSIGN_OR_RETURN(p.w_zp, ReadZeroPoints(node, wn + "_zero_point", In(inputs, q.w_zp), w_dt, channels));
    p.out = Int32QOutput();
    return p;
  }
  WH_ASSIGN_OR_RETURN(QChannelParams x,
                      ReadQParams(node, xn + "_scale", In(inputs, q.x_scale), In(inputs, q.x_zp), x_dt, -1));
  WH_ASSIGN_OR_RETURN(QChannelParams w,
                      ReadQParams(node, wn + "_scale", In(inputs, q.w_scale), In(inputs, q.w_zp), w_dt, channels));
  WH_ASSIGN_OR_RETURN(p.out, MakeQOutput(node, x, w, In(inputs, q.y_scale), In(inputs, q.y_zp), In(inputs, q.bias),
                                         channels, act));
  p.x_zp = x.zero_point;
  p.w_zp = w.zero_point;
  return p;
}

bool AllParamsConstant(const KernelInit& init, const QInputs& q) {
  for (int i : {q.x_scale, q.x_zp, q.w_scale, q.w_zp, q.y_scale, q.y_zp, q.bias})
    if (i >= 0 && InDType(init, i) != DType::kUndefined && !In(init.const_inputs, i)) return false;
  return true;
}

Status CheckDataTypes(const std::string& node, const KernelInit& init, const QInputs& q) {
  for (int i : {q.x, q.w})
    if (!IsByte(InDType(init, i)))
      return InvalidArgument(node + ": input " + std::to_string(i) + " must be int8 or uint8, got " +
                             DTypeName(InDType(init, i)));
  return Status::Ok();
}

// The Relu or Clip the runtime fused into a QGemm/QConv (none for the ONNX ops).
FusedActivation ActivationFrom(const KernelInit& init) { return FusedActivation::FromAttrs(init.attrs); }

// ---------------------------------------------------------------------------------------------
// Matrix products: QGemm, QLinearMatMul, MatMulInteger.

class QMatMulKernel : public OpKernel {
 public:
  QMatMulKernel(const KernelInit& init, QInputs q)
      : q_(q),
        act_(ActivationFrom(init)),
        node_(init.node_name),
        pack_(kQLinear.Pick(init.backend, &QLinearFns::pack_gemm_weights)),
        gemm_(kQLinear.Pick(init.backend, &QLinearFns::gemm)) {}

  Status Init(const KernelInit& init) {
    WH_RETURN_IF_ERROR(CheckDataTypes(node_, init, q_));
    const Tensor* w = In(init.const_inputs, q_.w);
    if (!w || w->rank() < 1) return Status::Ok();
    const int64_t channels = w->rank() == 1 ? 1 : w->dim(w->rank() - 1);
    // A per-row zero point of a (MatMulInteger) depends on a's shape: resolved per call.
    const Tensor* x_zp = In(init.const_inputs, q_.x_zp);
    if (AllParamsConstant(init, q_) && !(x_zp && x_zp->numel() > 1)) {
      WH_ASSIGN_OR_RETURN(params_, ResolveQParams(node_, q_, init.const_inputs, InDType(init, q_.x), w->dtype(),
                                                  channels, -1, act_));
    }
    if (pack_ && w->rank() == 2 && params_) packed_ = pack_(*w, params_->w_zp);
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor& a = *ctx.inputs[static_cast<size_t>(q_.x)];
    const Tensor& b = *ctx.inputs[static_cast<size_t>(q_.w)];
    Tensor& y = *ctx.outputs[0];
    if (a.rank() < 1 || b.rank() < 1) return InvalidArgument(node_ + ": matrix inputs must have rank >= 1");
    // numpy matmul: 1-D operands are promoted and the added dim is dropped from y.
    Dims ad = a.dims(), bd = b.dims();
    if (ad.size() == 1) ad.insert(ad.begin(), 1);
    if (bd.size() == 1) bd.push_back(1);
    const int64_t M = ad[ad.size() - 2], K = ad.back(), N = bd.back();
    if (bd[bd.size() - 2] != K)
      return InvalidArgument(node_ + ": inner dims differ: " + DimsToString(a.dims()) + " x " + DimsToString(b.dims()));
    QParams local;
    const QParams* p = params_ ? &*params_ : nullptr;
    if (!p) {
      WH_ASSIGN_OR_RETURN(local, ResolveQParams(node_, q_, ctx.inputs, a.dtype(), b.dtype(), N, M, act_));
      p = &local;
    }
    // Batch dims broadcast; y's batch is given by the output's dims.
    const size_t rank = std::max(ad.size(), bd.size());
    Dims ab(rank - 2, 1), bb(rank - 2, 1), yb(rank - 2, 1);
    for (size_t i = 0; i + 2 < ad.size(); ++i) ab[rank - ad.size() + i] = ad[i];
    for (size_t i = 0; i + 2 < bd.size(); ++i) bb[rank - bd.size() + i] = bd[i];
    int64_t batches = 1;
    for (size_t i = 0; i + 2 < rank; ++i) {
      if (ab[i] != bb[i] && ab[i] != 1 && bb[i] != 1)
        return InvalidArgument(node_ + ": batch dims do not broadcast: " + DimsToString(a.dims()) + " x " +
                               DimsToString(b.dims()));
      yb[i] = std::max(ab[i], bb[i]);
      batches *= yb[i];
    }
    if (y.numel() != batches * M * N)
      return InvalidArgument(node_ + ": output has " + std::to_string(y.numel()) + " elements, expected " +
                             std::to_string(batches * M * N));
    const size_t es = y.dtype() == DType::kUInt8 || y.dtype() == DType::kInt8 ? 1 : 4;
    // Fold a's batch into rows when b is shared and the x zero point is per-tensor.
    const bool fold = bd.size() == 2 && p->x_zp.size() == 1;
    if (fold) {
      const int64_t rows = batches * M;
      return Product(ctx, a.raw_data(), a.dtype(), rows, K, b.raw_data(), b.dtype(), N, *p, true, y.raw_data());
    }
    for (int64_t t = 0; t < batches; ++t) {
      int64_t ao = 0, bo = 0, r = t;
      int64_t astride = M * K, bstride = K * N;
      for (size_t i = rank - 2; i-- > 0;) {
        const int64_t idx = r % yb[i];
        r /= yb[i];
        if (ab[i] != 1) ao += idx * astride;
        if (bb[i] != 1) bo += idx * bstride;
        astride *= ab[i];
        bstride *= bb[i];
      }
      const char* ap = static_cast<const char*>(a.raw_data()) + ao;
      const char* bp = static_cast<const char*>(b.raw_data()) + bo;
      char* yp = static_cast<char*>(y.raw_data()) + static_cast<size_t>(t * M * N) * es;
      WH_RETURN_IF_ERROR(Product(ctx, ap, a.dtype(), M, K, bp, b.dtype(), N, *p, bo == 0 && bd.size() == 2, yp));
    }
    return Status::Ok();
  }

 private:
  // y[rows, N] = epilogue(a[rows, K] * b[K, N]); b_is_weight: b is the kernel's (maybe packed) b.
  Status Product(KernelContext& ctx, const void* a, DType a_dt, int64_t rows, int64_t K, const void* b, DType b_dt,
                 int64_t N, const QParams& p, bool b_is_weight, void* y) const {
    QGemmCall c;
    c.a = QMatrix{a, a_dt, K, &p.x_zp};
    c.b = QMatrix{b, b_dt, N, &p.w_zp};
    c.rows = rows;
    c.N = N;
    c.K = K;
    c.out = &p.out;
    c.packed_b = b_is_weight ? packed_.get() : nullptr;
    c.y = y;
    return gemm_(c, ctx.num_threads);
  }

  QInputs q_;
  FusedActivation act_;
  std::string node_;
  QPackedWeights (*pack_)(const Tensor&, const std::vector<int32_t>&);
  Status (*gemm_)(const QGemmCall&, int);
  std::optional<QParams> params_;
  QPackedWeights packed_;  // the backend's packed constant weights
};

// ---------------------------------------------------------------------------------------------
// Convolutions: QConv, QLinearConv, ConvInteger (im2col on the integer data; padding reads x_zp).

// The backend's own MaxPool kernel (window = stride, no padding, floor mode) for input dtype dt:
// the fused pool's fallback where the backend's conv cannot pool.
StatusOr<std::unique_ptr<OpKernel>> MakeMaxPool(const std::vector<int64_t>& window, DType dt, Backend backend,
                                                const std::string& node) {
  const KernelFactory* f = KernelRegistry::Global().Find("", "MaxPool");
  if (!f) return Internal(node + ": no MaxPool kernel for the fused pool");
  AttributeMap a;
  a.Set("kernel_shape", Attribute::Ints(window));
  a.Set("strides", Attribute::Ints(window));
  // opset 12: MaxPool on uint8/int8.
  const KernelInit init{a, 12, {dt}, {nullptr}, 1, node + " (fused max pool)", backend};
  return (*f)(init);
}

class QConvKernel : public OpKernel {
 public:
  QConvKernel(const KernelInit& init, QInputs q)
      : q_(q),
        act_(ActivationFrom(init)),
        node_(init.node_name),
        attrs_(init.attrs),
        pack_(kQLinear.Pick(init.backend, &QLinearFns::pack_conv_weights)),
        conv_(kQLinear.Pick(init.backend, &QLinearFns::conv)),
        pools_(kQLinear.Pick(init.backend, &QLinearFns::conv_pools)),
        pool_(init.attrs.GetInts("_max_pool")),
        // This kernel runs on the host, so its fallback pool must too: a device backend's MaxPool
        // (CUDA, when the CUDA QConv declined this node) would be handed host pointers (seen on
        // an H100 as wrong bytes, then an illegal memory access).
        pool_backend_(BackendDevice(init.backend) == DeviceType::kCpu ? init.backend : Backend::kCpu) {}

  Status Init(const KernelInit& init) {
    WH_RETURN_IF_ERROR(CheckDataTypes(node_, init, q_));
    group_ = init.attrs.GetInt("group", 1);
    if (group_ < 1) return InvalidArgument(node_ + ": group must be >= 1, got " + std::to_string(group_));
    const Tensor* w = In(init.const_inputs, q_.w);
    if (!w || w->rank() < 3) return Status::Ok();
    if (AllParamsConstant(init, q_)) {
      WH_ASSIGN_OR_RETURN(params_, ResolveQParams(node_, q_, init.const_inputs, InDType(init, q_.x), w->dtype(),
                                                  w->dim(0), -1, act_));
    }
    if (pack_ && params_ && w->dim(0) % group_ == 0) packed_ = pack_(*w, params_->w_zp, group_);
    if (!pool_.empty() && params_) {
      pool_dtype_ = params_->out.dtype;
      WH_ASSIGN_OR_RETURN(pool_kernel_, MakeMaxPool(pool_, pool_dtype_, pool_backend_, node_));
    }
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor& x = *ctx.inputs[static_cast<size_t>(q_.x)];
    const Tensor& w = *ctx.inputs[static_cast<size_t>(q_.w)];
    Tensor& y = *ctx.outputs[0];
    WH_ASSIGN_OR_RETURN(ConvShape s, ResolveQConvShape(node_, attrs_, x.dims(), w.dims()));
    QParams local;
    const QParams* p = params_ ? &*params_ : nullptr;
    if (!p) {
      WH_ASSIGN_OR_RETURN(local, ResolveQParams(node_, q_, ctx.inputs, x.dtype(), w.dtype(), s.out_channels, -1, act_));
      p = &local;
    }
    // The conv's output dims, and the pooled ones when a max pool is fused.
    Dims conv_dims{s.batch, s.out_channels}, y_dims = conv_dims;
    if (!pool_.empty() && static_cast<int>(pool_.size()) != s.geo.spatial)
      return InvalidArgument(node_ + ": _max_pool has " + std::to_string(pool_.size()) + " entries for " +
                             std::to_string(s.geo.spatial) + " spatial dims");
    for (int i = 0; i < s.geo.spatial; ++i) {
      conv_dims.push_back(s.geo.out[i]);
      y_dims.push_back(pool_.empty() ? s.geo.out[i] : s.geo.out[i] / pool_[static_cast<size_t>(i)]);
    }
    if (y.dims() != y_dims)
      return InvalidArgument(node_ + ": output is " + DimsToString(y.dims()) + ", expected " + DimsToString(y_dims));
    QConvCall c;
    c.shape = &s;
    c.x = &x;
    c.w = &w;
    c.x_zp = p->x_zp[0];
    c.w_zp = &p->w_zp;
    c.out = &p->out;
    c.packed_w = packed_.get();
    c.y = &y;
    if (pool_.empty()) return conv_(c, ctx.num_threads);
    if (pools_ && pools_(c)) {
      c.max_pool = &pool_;
      return conv_(c, ctx.num_threads);
    }
    Tensor full(y.dtype(), conv_dims);
    c.y = &full;
    WH_RETURN_IF_ERROR(conv_(c, ctx.num_threads));
    std::unique_ptr<OpKernel> per_call;
    const OpKernel* pool = pool_kernel_.get();
    if (!pool || y.dtype() != pool_dtype_) {  // parameters not constant: the dtype is known only now
      WH_ASSIGN_OR_RETURN(per_call, MakeMaxPool(pool_, y.dtype(), pool_backend_, node_));
      pool = per_call.get();
    }
    KernelContext pc{{&full}, {&y}, ctx.num_threads};
    return pool->Compute(pc);
  }

 private:
  QInputs q_;
  FusedActivation act_;
  std::string node_;
  AttributeMap attrs_;
  QPackedWeights (*pack_)(const Tensor&, const std::vector<int32_t>&, int64_t);
  Status (*conv_)(const QConvCall&, int);
  bool (*pools_)(const QConvCall&);
  std::vector<int64_t> pool_;  // _max_pool: the fused max pool's window (= stride), or empty
  Backend pool_backend_;  // a host backend
  std::unique_ptr<OpKernel> pool_kernel_;  // the fallback pool, built at load for pool_dtype_
  DType pool_dtype_ = DType::kUndefined;
  int64_t group_ = 1;
  std::optional<QParams> params_;
  QPackedWeights packed_;  // the backend's packed constant weights
};

template <class K>
Factory Make(const KernelInit& init, QInputs q) {
  auto k = std::make_unique<K>(init, q);
  WH_RETURN_IF_ERROR(k->Init(init));
  return std::unique_ptr<OpKernel>(std::move(k));
}

Factory MakeDynamicQuantize(const KernelInit& init) {
  const std::string node = init.node_name;
  if (InDType(init, 0) != DType::kFloat32)
    return InvalidArgument(node + ": x must be float32, got " + DTypeName(InDType(init, 0)));
  const auto quantize = kQLinear.Pick(init.backend, &QLinearFns::dynamic_quantize);
  return WrapFnKernel([quantize](KernelContext& ctx) -> Status {
    Tensor* y_scale = ctx.outputs.size() > 1 ? ctx.outputs[1] : nullptr;
    Tensor* y_zero_point = ctx.outputs.size() > 2 ? ctx.outputs[2] : nullptr;
    return quantize(*ctx.inputs[0], ctx.outputs[0], y_scale, y_zero_point, ctx.num_threads);
  });
}

}  // namespace

void RegisterQLinearKernels(KernelRegistry& r) {
  DeclareFamily(r, kQLinear, &QLinearFns::gemm, kWhittleDomain, "QGemm", {DType::kUInt8, DType::kInt8}, [](const KernelInit& i) { return Make<QMatMulKernel>(i, kQMatMulInputs); });
  DeclareFamily(r, kQLinear, &QLinearFns::gemm, "", "QLinearMatMul", {DType::kUInt8, DType::kInt8}, [](const KernelInit& i) { return Make<QMatMulKernel>(i, kQMatMulInputs); });
  DeclareFamily(r, kQLinear, &QLinearFns::gemm, "", "MatMulInteger", {DType::kUInt8, DType::kInt8}, [](const KernelInit& i) { return Make<QMatMulKernel>(i, kMatMulIntegerInputs); });
  DeclareFamily(r, kQLinear, &QLinearFns::conv, kWhittleDomain, "QConv", {DType::kUInt8, DType::kInt8}, [](const KernelInit& i) { return Make<QConvKernel>(i, kQConvInputs); });
  DeclareFamily(r, kQLinear, &QLinearFns::conv, "", "QLinearConv", {DType::kUInt8, DType::kInt8}, [](const KernelInit& i) { return Make<QConvKernel>(i, kQConvInputs); });
  DeclareFamily(r, kQLinear, &QLinearFns::conv, "", "ConvInteger", {DType::kUInt8, DType::kInt8}, [](const KernelInit& i) { return Make<QConvKernel>(i, kConvIntegerInputs); });
  DeclareFamily(r, kQLinear, &QLinearFns::dynamic_quantize, "", "DynamicQuantizeLinear", {DType::kFloat32}, MakeDynamicQuantize);
}

}  // namespace whittle
