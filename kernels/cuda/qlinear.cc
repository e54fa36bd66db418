// The CUDA int8 kernels' host side. QGemm / QLinearMatMul (a 2-D constant b) and QConv /
// QLinearConv (2-D, constant weights) whose quantization parameters are all constants — what the
// runtime's QDQ fusion makes of compress-model --int8 output — pack their weights into the dp4a
// tile GEMM's layout and upload them with the epilogue's parameters once at load
// (kernels/cuda/qgemm_body.h), then run on the device per call; QConv's fused max pool
// (_max_pool) runs as a second kernel. QuantizeLinear / DequantizeLinear with constant
// parameters, per tensor or per axis. Anything else (runtime-valued parameters, int32 data,
// fused attributes other than Relu, Clip and _max_pool) is declined and runs on the CPU.
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/common/quant_params.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/pool.h"
#include "kernels/cuda/qepilogue_params.h"
#include "kernels/cuda/qgemm_body.h"
#include "kernels/cuda/qlinear.h"
#include "kernels/cuda/quant.h"
#include "kernels/cuda/quant_body.h"
#include "kernels/reference/qlinear.h"

namespace whittle::cuda {
namespace {

bool IsByte(DType t) { return t == DType::kUInt8 || t == DType::kInt8; }

// Device copies of what a kernel reads besides its inputs (kept alive by the kernel).
struct Uploads {
  std::vector<std::shared_ptr<Buffer>> keep;
  template <class T>
  StatusOr<const T*> Put(const std::vector<T>& v) {
    WH_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> b, Upload(v.data(), v.size() * sizeof(T)));
    keep.push_back(b);
    return static_cast<const T*>(b->data());
  }
};

StatusOr<QEpiParams> UploadEpilogue(const QOutput& out, Uploads& up) {
  const float* mult = nullptr;
  const int32_t* bias = nullptr;
  if (!out.multiplier.empty()) {
    WH_ASSIGN_OR_RETURN(mult, up.Put(out.multiplier));
  }
  if (!out.bias.empty()) {
    WH_ASSIGN_OR_RETURN(bias, up.Put(out.bias));
  }
  return EpilogueParams(out, mult, bias);
}

// The quantization parameters of a QGemm/QConv-like node (x, x_scale, x_zp, w, w_scale, w_zp,
// y_scale, y_zp, bias) with `channels` output channels; nullopt where the CPU kernel would refuse
// them, so that the node, and its message, are left to it.
struct Int8Params {
  QChannelParams x, w;
  QOutput out;
};
std::optional<Int8Params> ReadInt8Params(const KernelInit& init, const Tensor& w, int64_t channels,
                                         const FusedActivation& act) {
  auto x = ReadQParams(init.node_name, "x_scale", ConstInput(init, 1), ConstInput(init, 2), InputDType(init, 0), -1);
  auto wq = ReadQParams(init.node_name, "w_scale", ConstInput(init, 4), ConstInput(init, 5), w.dtype(), channels);
  if (!x.ok() || !wq.ok()) return std::nullopt;
  auto out = MakeQOutput(init.node_name, *x, *wq, ConstInput(init, 6), ConstInput(init, 7), ConstInput(init, 8), channels, act);
  if (!out.ok()) return std::nullopt;
  return Int8Params{*x, *wq, *out};
}

// The activation fused into a QGemm/QConv: none, Relu or Clip, which the epilogue applies as its
// integer clamp (MakeQOutput); nullopt for other activations or unknown internal attributes.
std::optional<FusedActivation> QActivation(const AttributeMap& a, std::initializer_list<const char*> also = {}) {
  const FusedActivation f = FusedActivation::FromAttrs(a);
  AttributeMap rest = a;
  if (f.kind == FusedActivation::kClip)
    for (const char* k : {"_activation", "_min", "_max"}) rest.Erase(k);
  Unary ignored;
  if (!FusedKind(rest, &ignored, also)) return std::nullopt;
  return f;
}

size_t ElemSize(DType t) { return t == DType::kUInt8 || t == DType::kInt8 ? 1 : 4; }

// QGemm / QLinearMatMul inputs: x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, bias.
KernelOr MakeQGemm(const KernelInit& init) {
  const std::optional<FusedActivation> act = QActivation(init.attrs);
  const Tensor* w = ConstInput(init, 3);
  if (!act || !IsByte(InputDType(init, 0)) || !w || w->rank() != 2 || !IsByte(w->dtype()) ||
      !ConstInput(init, 1) || !ConstInput(init, 4) || !ConstantInputs(init, {1, 2, 4, 5, 6, 7, 8}))
    return KernelOr(nullptr);
  const std::string node = init.node_name;
  const DType xdt = InputDType(init, 0);
  const int64_t K = w->dim(0), N = w->dim(1);
  const std::optional<Int8Params> q = ReadInt8Params(init, *w, N, *act);
  if (!q) return KernelOr(nullptr);
  const QChannelParams* xp = &q->x;
  const QChannelParams* wq = &q->w;
  const QOutput* out = &q->out;
  auto up = std::make_shared<Uploads>();
  QPackedB shape = PackQGemmB(static_cast<const uint8_t*>(w->raw_data()), w->dtype() == DType::kUInt8, K, N,
                              wq->zero_point);
  QGemmDevicePtrs ptrs;
  const bool x_uint8 = xdt == DType::kUInt8;
  const int32_t za = xp->zero_point[0] - (x_uint8 ? 128 : 0);
  WH_ASSIGN_OR_RETURN(ptrs.bt, up->Put(shape.bt));
  WH_ASSIGN_OR_RETURN(ptrs.words, up->Put(shape.words));
  WH_ASSIGN_OR_RETURN(ptrs.zero_point, up->Put(shape.zero_point));
  WH_ASSIGN_OR_RETURN(ptrs.colsum, up->Put(shape.colsum));
  WH_ASSIGN_OR_RETURN(ptrs.za, up->Put(std::vector<int32_t>{za}));
  WH_ASSIGN_OR_RETURN(QEpiParams ep, UploadEpilogue(*out, *up));
  shape.words.clear();
  shape.colsum.clear();
  shape.bt.clear();
  return Kernel([=](KernelContext& ctx) -> Status {
    const Tensor& a = *ctx.inputs[0];
    Tensor& y = *ctx.outputs[0];
    if (a.rank() < 1 || a.dims().back() != K)
      return InvalidArgument(node + ": a's last dim must be " + std::to_string(K) + ", got " + DimsToString(a.dims()));
    const int64_t rows = a.numel() / K;
    if (y.numel() != rows * N) return InvalidArgument(node + ": output has the wrong size " + DimsToString(y.dims()));
    if (rows == 0 || N == 0) return Status::Ok();
    int32_t* rowsum = nullptr;
    if (shape.zero_point_nonzero) {
      WH_ASSIGN_OR_RETURN(void* p, Scratch(static_cast<size_t>(rows) * sizeof(int32_t), 1));
      rowsum = static_cast<int32_t*>(p);
    }
    int32_t* gemm_scratch = nullptr;  // split-K sums (few tiles) or the tensor-core GEMM's operands
    if (const int64_t ints = QGemmScratchInts(std::min(rows, kMaxGridYZ * kQTileM), N, shape.Kw); ints > 0) {
      WH_ASSIGN_OR_RETURN(void* p, Scratch(static_cast<size_t>(ints) * sizeof(int32_t), 3));
      gemm_scratch = static_cast<int32_t*>(p);
    }
    (void)up;  // the device parameters live as long as the kernel
    RunQGemm(CudaQLaunches(), shape, ptrs, static_cast<const uint8_t*>(a.raw_data()), x_uint8, za, rows, ep, y.raw_data(),
             ElemSize(y.dtype()), rowsum, gemm_scratch);
    return Launched("QGemm");
  });
}

// QConv / QLinearConv: the same inputs, w [M, C/group, k_h, k_w].
KernelOr MakeQConv(const KernelInit& init) {
  const std::optional<FusedActivation> act = QActivation(init.attrs, {"_max_pool"});
  const Tensor* w = ConstInput(init, 3);
  if (!act || !IsByte(InputDType(init, 0)) || !w || w->rank() != 4 ||
      !IsByte(w->dtype()) || !ConstInput(init, 1) || !ConstInput(init, 4) || !ConstantInputs(init, {1, 2, 4, 5, 6, 7, 8}))
    return KernelOr(nullptr);
  const std::string node = init.node_name;
  const AttributeMap attrs = init.attrs;
  const DType xdt = InputDType(init, 0);
  const int64_t group = attrs.GetInt("group", 1), M = w->dim(0), Kg = w->dim(1) * w->dim(2) * w->dim(3);
  const std::vector<int64_t> pool = attrs.GetInts("_max_pool", {});
  if (group < 1 || M % group != 0 || !(pool.empty() || pool.size() == 2)) return KernelOr(nullptr);
  const std::optional<Int8Params> q = ReadInt8Params(init, *w, M, *act);
  if (!q) return KernelOr(nullptr);
  const QChannelParams* xp = &q->x;
  const QChannelParams* wq = &q->w;
  const QOutput* out = &q->out;
  const DType ydt = out->dtype;
  auto up = std::make_shared<Uploads>();
  QPackedW packed = PackQConvW(static_cast<const uint8_t*>(w->raw_data()), w->dtype() == DType::kUInt8, M, Kg,
                               wq->zero_point);
  const bool x_uint8 = xdt == DType::kUInt8;
  const int32_t zb = xp->zero_point[0] - (x_uint8 ? 128 : 0);
  QConvDevicePtrs ptrs;
  WH_ASSIGN_OR_RETURN(ptrs.bytes, up->Put(packed.bytes));
  WH_ASSIGN_OR_RETURN(ptrs.zero_point, up->Put(packed.zero_point));
  WH_ASSIGN_OR_RETURN(ptrs.rowsum, up->Put(packed.rowsum));
  WH_ASSIGN_OR_RETURN(ptrs.zb, up->Put(std::vector<int32_t>{zb}));
  WH_ASSIGN_OR_RETURN(QEpiParams ep, UploadEpilogue(*out, *up));
  packed.bytes.clear();
  packed.rowsum.clear();
  const Dims wdims = w->dims();
  return Kernel([=](KernelContext& ctx) -> Status {
    const Tensor& x = *ctx.inputs[0];
    Tensor& y = *ctx.outputs[0];
    if (x.rank() != 4) return Unimplemented(node + ": the CUDA integer Conv is 2-D");
    WH_ASSIGN_OR_RETURN(ConvShape s, ResolveQConvShape(node, attrs, x.dims(), wdims));
    QConvGeometry g;
    g.C = s.in_channels;
    g.M = s.out_channels;
    g.group = s.group;
    g.in_h = s.geo.in[0];
    g.in_w = s.geo.in[1];
    g.out_h = s.geo.out[0];
    g.out_w = s.geo.out[1];
    g.k_h = s.geo.kernel[0];
    g.k_w = s.geo.kernel[1];
    g.stride_h = s.geo.stride[0];
    g.stride_w = s.geo.stride[1];
    g.dil_h = s.geo.dilation[0];
    g.dil_w = s.geo.dilation[1];
    g.pad_top = s.geo.pad_begin[0];
    g.pad_left = s.geo.pad_begin[1];
    const int64_t P = g.out_h * g.out_w, images = s.batch;
    Dims y_dims{images, g.M, pool.empty() ? g.out_h : g.out_h / pool[0], pool.empty() ? g.out_w : g.out_w / pool[1]};
    if (y.dims() != y_dims)
      return InvalidArgument(node + ": output is " + DimsToString(y.dims()) + ", expected " + DimsToString(y_dims));
    if (y.numel() == 0) return Status::Ok();
    // About 128 MB of columns at a time.
    const int64_t per_image = QConvScratchInts(g, packed, 1);
    const int64_t chunk = std::max<int64_t>(
        1, std::min({images, kMaxGridYZ, (int64_t{32} << 20) / std::max<int64_t>(1, per_image)}));
    WH_ASSIGN_OR_RETURN(void* scratch, Scratch(static_cast<size_t>(QConvScratchInts(g, packed, chunk)) * 4, 1));
    void* conv_out = y.raw_data();
    if (!pool.empty()) {
      WH_ASSIGN_OR_RETURN(conv_out, Scratch(static_cast<size_t>(images * g.M * P) * ElemSize(ydt), 2));
    }
    (void)up;
    RunQConv(CudaQLaunches(), g, packed, ptrs, static_cast<const uint8_t*>(x.raw_data()), x_uint8, zb, images, chunk, ep,
             conv_out, ElemSize(ydt), static_cast<int32_t*>(scratch));
    if (!pool.empty()) {  // window = stride, no padding, floor mode
      Window2d pw;
      pw.in_h = g.out_h;
      pw.in_w = g.out_w;
      pw.out_h = y.dim(2);
      pw.out_w = y.dim(3);
      pw.k_h = pw.stride_h = pool[0];
      pw.k_w = pw.stride_w = pool[1];
      if (ydt == DType::kFloat32) LaunchMaxPool2d(static_cast<const float*>(conv_out), y.data<float>(), images * g.M, pw, Stream());
      else if (ydt == DType::kInt32) return Unimplemented(node + ": a fused max pool of int32 output");
      else LaunchMaxPool2dBytes(conv_out, y.raw_data(), ydt == DType::kUInt8, images * g.M, pw, Stream());
    }
    return Launched("QConv");
  });
}

// QuantizeLinear (dequantize false) / DequantizeLinear with constant scale and zero point.
KernelOr MakeQuant(const KernelInit& init, bool dequantize) {
  for (const auto& [name, value] : init.attrs.all())
    if (name != "axis") return KernelOr(nullptr);  // block_size, output_dtype, saturate: not here
  const Tensor* scale = ConstInput(init, 1);
  const Tensor* zp = ConstInput(init, 2);
  const DType xdt = InputDType(init, 0);
  if (!scale || scale->dtype() != DType::kFloat32 || !ConstantInputs(init, {2})) return KernelOr(nullptr);
  if (zp && !IsByte(zp->dtype())) return KernelOr(nullptr);
  if (dequantize ? !IsByte(xdt) : xdt != DType::kFloat32) return KernelOr(nullptr);
  const bool q_uint8 = dequantize ? xdt == DType::kUInt8 : (!zp || zp->dtype() == DType::kUInt8);
  const int64_t axis = init.attrs.GetInt("axis", 1);
  auto up = std::make_shared<Uploads>();
  std::vector<float> sv(scale->data<float>(), scale->data<float>() + scale->numel());
  QuantizeArgs args;
  args.q_uint8 = q_uint8;
  WH_ASSIGN_OR_RETURN(args.scale, up->Put(sv));
  if (zp) {
    std::vector<int32_t> zv(static_cast<size_t>(zp->numel()));
    for (int64_t i = 0; i < zp->numel(); ++i) zv[static_cast<size_t>(i)] = static_cast<int32_t>(ZeroPointAt(zp, i));
    WH_ASSIGN_OR_RETURN(args.zero_point, up->Put(zv));
  }
  const Tensor scale_host = *scale;
  const Tensor zp_host = zp ? *zp : Tensor();
  const std::string node = init.node_name;
  return Kernel([=](KernelContext& ctx) -> Status {
    const Tensor& x = *ctx.inputs[0];
    Tensor& y = *ctx.outputs[0];
    auto layout = ResolveQuantLayout(x, scale_host, zp_host.defined() ? &zp_host : nullptr, axis);
    if (!layout.ok()) return InvalidArgument(node + ": " + layout.status().message());
    QuantizeArgs a = args;
    a.x = x.raw_data();
    a.y = y.raw_data();
    a.channels = layout->channels;
    a.inner = layout->inner;
    (void)up;
    if (dequantize) LaunchDequantize(a, x.numel(), Stream());
    else LaunchQuantize(a, x.numel(), Stream());
    return Launched(dequantize ? "DequantizeLinear" : "QuantizeLinear");
  });
}

}  // namespace

void RegisterQLinearKernels(KernelRegistry& r) {
  DeclareCudaKernel(r, kWhittleDomain, "QGemm", {DType::kUInt8, DType::kInt8}, MakeQGemm);
  DeclareCudaKernel(r, "", "QLinearMatMul", {DType::kUInt8, DType::kInt8}, MakeQGemm);
  DeclareCudaKernel(r, kWhittleDomain, "QConv", {DType::kUInt8, DType::kInt8}, MakeQConv);
  DeclareCudaKernel(r, "", "QLinearConv", {DType::kUInt8, DType::kInt8}, MakeQConv);
  DeclareCudaKernel(r, "", "QuantizeLinear", {DType::kFloat32}, [](const KernelInit& i) { return MakeQuant(i, false); });
  DeclareCudaKernel(r, "", "DequantizeLinear", {DType::kUInt8, DType::kInt8}, [](const KernelInit& i) { return MakeQuant(i, true); });
}

}  // namespace whittle::cuda
