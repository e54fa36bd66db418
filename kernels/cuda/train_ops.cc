// The CUDA kernels a training graph (runtime/training/autodiff.h) needs beyond the inference ops,
// so that `finetune-model --device cuda` keeps its forward and backward passes on the GPU:
// ReduceSum/ReduceMean (bias gradients, batch statistics), inference-form BatchNormalization (fed
// the batch statistics), Expand and Shape (the gradients of reductions), Transpose, and the ai.whittle
// gradient ops ReluGrad, MaxPoolGrad, AveragePoolGrad, ConvGradInput (cuBLAS product W^T dY, then
// col2im) and ConvGradWeight (im2col, then dY col^T accumulated image by image). 2-D windows and
// float32 only; anything else declines to the CPU kernel like every CUDA factory.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/common/norm_shape.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/grad_body.h"
#include "kernels/cuda/kernels_impl.h"
#include "lib/ir/device.h"
#include "lib/ir/domain.h"

namespace whittle::cuda {
namespace {

bool Window2dAttrs(const AttributeMap& at) {
  return TwoD(at, "pads", 4) && TwoD(at, "strides", 2) && TwoD(at, "dilations", 2) && TwoD(at, "kernel_shape", 2);
}

// What every float 2-D window kernel here needs: float32 inputs, 2-D window attributes, and no
// input among `ranked` statically known to be other than 4-D.
bool FloatWindow2d(const KernelInit& init, std::initializer_list<size_t> ranked) {
  return init.AllFloat32() && Window2dAttrs(init.attrs) && NotKnownOtherThan4d(init, ranked);
}

// --- reductions -------------------------------------------------------------------------------

// ReduceSum/ReduceMean (op kReduceAdd, mean), ReduceMax/ReduceMin. The axes come from the
// attribute or, from opset 13/18 on, an input read on the host (HostInputs).
MakeFn ReduceOp(int op, bool mean) {
  return [op, mean](const KernelInit& init) -> KernelOr {
    if (InputDType(init, 0) != DType::kFloat32 || init.num_outputs != 1) return KernelOr(nullptr);
    const std::vector<int64_t> axes_attr = init.attrs.GetInts("axes", {});
    const bool axes_input = InputDType(init, 1) != DType::kUndefined;
    if (axes_input && InputDType(init, 1) != DType::kInt64) return KernelOr(nullptr);
    const bool noop_empty = init.attrs.GetInt("noop_with_empty_axes", 0) != 0;
    return Kernel([op, mean, axes_attr, axes_input, noop_empty](KernelContext& ctx) -> Status {
      const Tensor& x = *ctx.inputs[0];
      std::vector<int64_t> axes = axes_attr;
      if (axes_input && ctx.inputs.size() > 1 && ctx.inputs[1])
        axes.assign(ctx.inputs[1]->data<int64_t>(), ctx.inputs[1]->data<int64_t>() + ctx.inputs[1]->numel());
      if (axes.empty() && noop_empty) {  // the identity
        LaunchStridedCopy(x.data<float>(), ctx.outputs[0]->data<float>(), IdentityCopy(x.numel()), x.numel(), Stream());
        return Launched("a reduction");
      }
      const int rank = x.rank();
      if (rank > kMaxRank) return Unimplemented("CUDA reductions take up to 8 dims");
      std::vector<bool> reduced(static_cast<size_t>(rank), axes.empty());
      for (int64_t a : axes) {
        const int64_t d = a < 0 ? a + rank : a;
        if (d < 0 || d >= rank) return InvalidArgument("reduction axis " + std::to_string(a) + " is out of range");
        reduced[static_cast<size_t>(d)] = true;
      }
      ReduceShape r;
      int64_t stride = 1;
      std::vector<int64_t> strides(static_cast<size_t>(rank));
      for (int d = rank - 1; d >= 0; --d) {
        strides[static_cast<size_t>(d)] = stride;
        stride *= x.dim(d);
      }
      for (int d = 0; d < rank; ++d) {
        const bool red = reduced[static_cast<size_t>(d)];
        int64_t* dims = red ? r.reduced_dims : r.kept_dims;
        int64_t* str = red ? r.reduced_strides : r.kept_strides;
        int& n = red ? r.reduced_rank : r.kept_rank;
        dims[n] = x.dim(d);
        str[n] = strides[static_cast<size_t>(d)];
        ++n;
        (red ? r.count : r.outputs) *= x.dim(d);
      }
      if (ctx.outputs[0]->numel() != r.outputs) return Internal("reduction: the output size differs");
      if (r.count == 0) return Unimplemented("a reduction over no elements");
      r.op = op;
      r.scale = mean ? 1.f / static_cast<float>(r.count) : 1.f;
      LaunchReduce(x.data<float>(), ctx.outputs[0]->data<float>(), r, Stream());
      return Launched("a reduction");
    }, axes_input ? 0b10 : 0);
  };
}

KernelOr MakeBatchNorm(const KernelInit& init) {
  if (!init.AllFloat32() || init.input_dtypes.size() != 5 || init.num_outputs != 1) return KernelOr(nullptr);
  // Inference form only: the shared parser decides training per opset (opset 6's is_test=0
  // default trains; spatial=0 of opsets < 9 has per-element statistics).
  WH_ASSIGN_OR_RETURN(const BatchNormAttrs a, ParseBatchNormAttrs(init));
  if (a.training || !a.spatial) return KernelOr(nullptr);
  const float eps = a.epsilon;
  return Kernel([eps](KernelContext& ctx) -> Status {
    const Tensor& x = *ctx.inputs[0];
    if (x.rank() < 2) return InvalidArgument("BatchNormalization needs [N, C, ...]");
    const int64_t n = x.dim(0), c = x.dim(1), inner = x.numel() / std::max<int64_t>(1, n * c);
    for (int i = 1; i < 5; ++i)
      if (ctx.inputs[static_cast<size_t>(i)]->numel() != c)
        return InvalidArgument("BatchNormalization: input " + std::to_string(i) + " needs C values");
    LaunchBatchNorm(x.data<float>(), ctx.inputs[1]->data<float>(), ctx.inputs[2]->data<float>(),
                    ctx.inputs[3]->data<float>(), ctx.inputs[4]->data<float>(), eps, n, c, inner,
                    ctx.outputs[0]->data<float>(), Stream());
    return Launched("BatchNormalization");
  });
}

// --- shapes -----------------------------------------------------------------------------------

KernelOr MakeExpand(const KernelInit& init) {
  if (InputDType(init, 0) != DType::kFloat32) return KernelOr(nullptr);
  return Kernel([](KernelContext& ctx) -> Status {
    const Tensor& x = *ctx.inputs[0];
    Tensor& y = *ctx.outputs[0];
    if (y.rank() > kMaxRank) return Unimplemented("CUDA Expand takes up to 8 dims");
    BroadcastShape s;
    Dims out = y.dims();
    if (out.empty()) out = {1};
    s.rank = static_cast<int>(out.size());
    for (int d = 0; d < s.rank; ++d) s.dims[d] = out[static_cast<size_t>(d)];
    BroadcastStrides(x.dims(), out, s.a_strides);
    LaunchStridedCopy(x.data<float>(), y.data<float>(), s, y.numel(), Stream());
    return Launched("Expand");
  });
}

// Transpose of float32 x: y's index walks x at x's strides taken in perm's order.
KernelOr MakeTranspose(const KernelInit& init) {
  if (InputDType(init, 0) != DType::kFloat32) return KernelOr(nullptr);
  const std::vector<int64_t> perm = init.attrs.GetInts("perm", {});
  return Kernel([perm](KernelContext& ctx) -> Status {
    const Tensor& x = *ctx.inputs[0];
    Tensor& y = *ctx.outputs[0];
    const int r = x.rank();
    if (r > kMaxRank) return Unimplemented("CUDA Transpose takes up to 8 dims");
    if (y.numel() == 0) return Status::Ok();
    int64_t strides[kMaxRank] = {}, s = 1;
    for (int d = r - 1; d >= 0; --d) strides[d] = s, s *= x.dim(d);
    BroadcastShape b;  // a scalar: one element, rank 1
    b.rank = std::max(r, 1);
    b.dims[0] = 1;
    for (int d = 0; d < r; ++d) {
      const int64_t p = perm.empty() ? r - 1 - d : perm[static_cast<size_t>(d)];
      if (p < 0 || p >= r) return InvalidArgument("Transpose: perm is not a permutation of the axes");
      b.dims[d] = y.dim(d);
      b.a_strides[d] = strides[p];
    }
    LaunchStridedCopy(x.data<float>(), y.data<float>(), b, y.numel(), Stream());
    return Launched("Transpose");
  });
}

// Shape reads only the input's dims: on the device it saves the copy of the whole tensor that a
// CPU Shape of a device value would cost. The few int64s go up with one small copy.
KernelOr MakeShape(const KernelInit& init) {
  const int64_t start = init.attrs.GetInt("start", 0), end = init.attrs.GetInt("end", INT64_MAX);
  return Kernel([start, end](KernelContext& ctx) -> Status {
    const Dims& d = ctx.inputs[0]->dims();
    const int64_t r = static_cast<int64_t>(d.size());
    auto clamp = [r](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + r : v, 0, r); };
    const int64_t b = clamp(start), e = std::max(b, clamp(end));
    Tensor& y = *ctx.outputs[0];
    if (y.numel() != e - b) return Internal("Shape: the output size differs");
    if (e == b) return Status::Ok();
    return DeviceRuntimeFor(DeviceType::kCuda)
        ->copy(y.raw_data(), DeviceType::kCuda, d.data() + b, DeviceType::kCpu, sizeof(int64_t) * static_cast<size_t>(e - b));
  });
}

// --- gradient ops (ai.whittle; lib/ops/grad.cc) -------------------------------------------------

KernelOr MakeReluGrad(const KernelInit& init) {
  if (!init.AllFloat32()) return KernelOr(nullptr);
  return Kernel([](KernelContext& ctx) -> Status {
    const Tensor& y = *ctx.inputs[0];
    if (ctx.inputs[1]->numel() != y.numel()) return InvalidArgument("ReluGrad: Y and dY differ in size");
    LaunchReluGrad(y.data<float>(), ctx.inputs[1]->data<float>(), ctx.outputs[0]->data<float>(), y.numel(), Stream());
    return Launched("ReluGrad");
  });
}

MakeFn PoolGradOp(bool max) {
  return [max](const KernelInit& init) -> KernelOr {
    const std::vector<int64_t> ks = init.attrs.GetInts("kernel_shape", {});
    if (!FloatWindow2d(init, {0, 1}) || ks.size() != 2 || init.attrs.GetInt("storage_order", 0) != 0)
      return KernelOr(nullptr);
    const AttributeMap at = init.attrs;
    const bool include_pad = at.GetInt("count_include_pad", 0) != 0;
    return Kernel([=](KernelContext& ctx) -> Status {
      const Tensor& x = *ctx.inputs[0];
      const Tensor& dy = *ctx.inputs[1];
      if (x.rank() != 4 || dy.rank() != 4) return Unimplemented("the CUDA pool gradients are 2-D");
      const Window2d w = WindowOf(at, ks[0], ks[1], x, dy);
      LaunchPoolGrad2d(max ? x.data<float>() : nullptr, dy.data<float>(), ctx.outputs[0]->data<float>(),
                       x.dim(0) * x.dim(1), w, max, include_pad, Stream());
      return Launched(max ? "MaxPoolGrad" : "AveragePoolGrad");
    });
  };
}


// The data gradient of a convolution, per group: col [Kg, P] = W_g^T [Kg, Mg] x dY_g [Mg, P] for a
// chunk of images in one strided-batched product, then col2im into dX (a 1x1 window at stride 1
// without padding: the product is dX itself). win: the convolution's window (in: dX, out: dY).
Status ConvDataGrad(const Tensor& dy, const Tensor& w, Tensor& dx, const Window2d& win, int64_t group,
                    Precision precision) {
  const int64_t N = dx.dim(0), C = dx.dim(1), M = w.dim(0), Cg = w.dim(1);
  const int64_t Mg = M / group, Kg = Cg * win.k_h * win.k_w, P = win.out_h * win.out_w, HW = win.in_h * win.in_w;
  WH_ASSIGN_OR_RETURN(const ColumnPlan plan, PlanColumns(win, group, N, Kg, P));
  const bool direct = plan.direct;
  float* col = plan.col;
  for (int64_t n0 = 0; n0 < N; n0 += plan.chunk) {
    const int64_t nb = std::min(plan.chunk, N - n0);
    for (int64_t g = 0; g < group; ++g) {
      GemmCall c;
      c.ta = true;
      c.M = Kg;
      c.N = P;
      c.K = Mg;
      c.A = w.data<float>() + g * Mg * Kg;
      c.lda = Kg;
      c.B = dy.data<float>() + (n0 * M + g * Mg) * P;
      c.ldb = P;
      c.stride_b = M * P;
      c.C = direct ? dx.data<float>() + n0 * C * HW : col;
      c.ldc = P;
      c.stride_c = direct ? C * HW : Kg * P;
      c.batch = nb;
      c.precision = precision;
      WH_RETURN_IF_ERROR(RowMajorGemm(c));
      if (!direct)
        for (int64_t i = 0; i < nb; ++i)
          LaunchCol2im(col + i * Kg * P, dx.data<float>() + ((n0 + i) * C + g * Cg) * HW, Cg, win, Stream());
    }
  }
  return Status::Ok();
}

// ConvGradInput(dY, W, X): ConvDataGrad with X's geometry.
KernelOr MakeConvGradInput(const KernelInit& init) {
  if (!FloatWindow2d(init, {0, 1, 2})) return KernelOr(nullptr);
  const AttributeMap at = init.attrs;
  const int64_t group = at.GetInt("group", 1);
  if (group < 1) return KernelOr(nullptr);
  const Precision precision = init.precision;
  return Kernel([=](KernelContext& ctx) -> Status {
    const Tensor& dy = *ctx.inputs[0];
    const Tensor& w = *ctx.inputs[1];
    const Tensor& x = *ctx.inputs[2];
    Tensor& dx = *ctx.outputs[0];
    if (x.rank() != 4 || w.rank() != 4 || dy.rank() != 4) return Unimplemented("the CUDA ConvGradInput is 2-D");
    if (w.dim(0) % group != 0 || w.dim(1) * group != x.dim(1))
      return InvalidArgument("ConvGradInput: W does not match X and group");
    WH_RETURN_IF_ERROR(ConvDataGrad(dy, w, dx, WindowOf(at, w.dim(2), w.dim(3), x, dy), group, precision));
    return Launched("ConvGradInput");
  });
}

// ConvTranspose(X, W[, B]) is the data gradient of the convolution that maps Y to X with the same
// weights (W [C_in, C_out/group, kh, kw] is that convolution's [M, C/group, kh, kw]), strides,
// pads and dilations: ConvDataGrad with Y as the convolution's input, then the bias. col2im
// writes every output position, those output_padding adds included. auto_pad and output_shape
// (pads derived from the output size) decline to the CPU.
KernelOr MakeConvTranspose(const KernelInit& init) {
  const AttributeMap& a = init.attrs;
  if (!FloatWindow2d(init, {0, 1}) || init.num_outputs != 1 || a.Has("output_shape") ||
      a.GetString("auto_pad", "NOTSET") != "NOTSET" || !TwoD(a, "output_padding", 2))
    return KernelOr(nullptr);
  const int64_t group = a.GetInt("group", 1);
  if (group < 1) return KernelOr(nullptr);
  const AttributeMap at = a;  // the kernel's own copy
  const Precision precision = init.precision;
  return Kernel([=](KernelContext& ctx) -> Status {
    const Tensor& x = *ctx.inputs[0];
    const Tensor& w = *ctx.inputs[1];
    const Tensor* bias = ctx.inputs.size() > 2 ? ctx.inputs[2] : nullptr;
    Tensor& y = *ctx.outputs[0];
    if (x.rank() != 4 || w.rank() != 4 || y.rank() != 4) return Unimplemented("the CUDA ConvTranspose is 2-D");
    if (w.dim(0) != x.dim(1) || w.dim(0) % group != 0 || w.dim(1) * group != y.dim(1))
      return InvalidArgument("ConvTranspose: W does not match X and group");
    WH_RETURN_IF_ERROR(ConvDataGrad(x, w, y, WindowOf(at, w.dim(2), w.dim(3), y, x), group, precision));
    if (bias) {
      if (bias->numel() != y.dim(1)) return InvalidArgument("ConvTranspose: B must have one value per output channel");
      LaunchChannelBiasAct(y.data<float>(), y.dim(0), y.dim(1), y.dim(2) * y.dim(3), bias->data<float>(), nullptr,
                           Unary::kIdentity, Stream());
    }
    return Launched("ConvTranspose");
  });
}

// ConvGradWeight(X, dY): per group, dW_g [Mg, Kg] = the sum over images of dY_g [Mg, P] x col^T
// [P, Kg] (col the im2col of the image; X itself for a 1x1 window at stride 1 without padding),
// one product per image accumulating into dW in image order.
KernelOr MakeConvGradWeight(const KernelInit& init) {
  const std::vector<int64_t> ks = init.attrs.GetInts("kernel_shape", {});
  if (!FloatWindow2d(init, {0, 1}) || ks.size() != 2) return KernelOr(nullptr);
  const AttributeMap at = init.attrs;
  const int64_t group = at.GetInt("group", 1);
  if (group < 1) return KernelOr(nullptr);
  const Precision precision = init.precision;
  return Kernel([=](KernelContext& ctx) -> Status {
    const Tensor& x = *ctx.inputs[0];
    const Tensor& dy = *ctx.inputs[1];
    Tensor& dw = *ctx.outputs[0];
    if (x.rank() != 4 || dy.rank() != 4) return Unimplemented("the CUDA ConvGradWeight is 2-D");
    const int64_t N = x.dim(0), C = x.dim(1), M = dy.dim(1);
    if (C % group != 0 || M % group != 0) return InvalidArgument("ConvGradWeight: channels are not a multiple of group");
    const int64_t Cg = C / group, Mg = M / group;
    const Window2d win = WindowOf(at, ks[0], ks[1], x, dy);
    const int64_t Kg = Cg * win.k_h * win.k_w, P = win.out_h * win.out_w, HW = win.in_h * win.in_w;
    if (dw.numel() != M * Kg) return Internal("ConvGradWeight: the output size differs");
    if (N == 0)  // no image: a zero gradient
      return Check(cudaMemsetAsync(dw.raw_data(), 0, dw.nbytes(), cudaStreamPerThread), "cudaMemsetAsync");
    WH_ASSIGN_OR_RETURN(const ColumnPlan plan, PlanColumns(win, group, N, Kg, P));
    const bool direct = plan.direct;
    const int64_t chunk = plan.chunk;
    float* col = plan.col;
    for (int64_t n0 = 0; n0 < N; n0 += chunk) {
      const int64_t nb = std::min(chunk, N - n0);
      for (int64_t g = 0; g < group; ++g) {
        if (!direct) LaunchIm2col(x.data<float>() + (n0 * C + g * Cg) * HW, C * HW, col, Kg * P, nb, Cg, win, Stream());
        for (int64_t i = 0; i < nb; ++i) {
          GemmCall c;
          c.tb = true;
          c.M = Mg;
          c.N = Kg;
          c.K = P;
          c.A = dy.data<float>() + ((n0 + i) * M + g * Mg) * P;
          c.lda = P;
          c.B = direct ? x.data<float>() + (n0 + i) * C * HW : col + i * Kg * P;
          c.ldb = P;
          c.C = dw.data<float>() + g * Mg * Kg;
          c.ldc = Kg;
          c.beta = n0 + i == 0 ? 0.f : 1.f;
          c.precision = precision;
          WH_RETURN_IF_ERROR(RowMajorGemm(c));
        }
      }
    }
    return Launched("ConvGradWeight");
  });
}

}  // namespace

void RegisterTrainingKernels(KernelRegistry& r) {
  DeclareCudaKernel(r, "", "ReduceSum", {DType::kFloat32}, ReduceOp(kReduceAdd, false));
  DeclareCudaKernel(r, "", "ReduceMean", {DType::kFloat32}, ReduceOp(kReduceAdd, true));
  DeclareCudaKernel(r, "", "ReduceMax", {DType::kFloat32}, ReduceOp(kReduceMax, false));
  DeclareCudaKernel(r, "", "ReduceMin", {DType::kFloat32}, ReduceOp(kReduceMin, false));
  DeclareCudaKernel(r, "", "BatchNormalization", {DType::kFloat32}, MakeBatchNorm);
  DeclareCudaKernel(r, "", "Expand", {DType::kFloat32}, MakeExpand);
  DeclareCudaKernel(r, "", "Shape", kAllTypes, MakeShape);
  DeclareCudaKernel(r, "", "Transpose", {DType::kFloat32}, MakeTranspose);
  DeclareCudaKernel(r, kWhittleDomain, "ReluGrad", {DType::kFloat32}, MakeReluGrad);
  DeclareCudaKernel(r, kWhittleDomain, "MaxPoolGrad", {DType::kFloat32}, PoolGradOp(true));
  DeclareCudaKernel(r, kWhittleDomain, "AveragePoolGrad", {DType::kFloat32}, PoolGradOp(false));
  DeclareCudaKernel(r, kWhittleDomain, "ConvGradInput", {DType::kFloat32}, MakeConvGradInput);
  DeclareCudaKernel(r, "", "ConvTranspose", {DType::kFloat32}, MakeConvTranspose);
  DeclareCudaKernel(r, kWhittleDomain, "ConvGradWeight", {DType::kFloat32}, MakeConvGradWeight);
}

}  // namespace whittle::cuda
