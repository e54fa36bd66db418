// The CUDA backend's 2-D Conv (float32): im2col of a chunk of images, then cuBLAS products per
// group (one wide product over the chunk's columns where that pays), bias, the runtime's fused
// residual and Relu in the epilogue; the training graph's ConvGradInput (cuBLAS product W^T dY,
// then col2im) and ConvGradWeight (im2col, then dY col^T accumulated image by image), and
// ConvTranspose as a data gradient; and the window geometry the pools and gradients share.
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/conv.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/kernel.h"
#include "lib/ir/domain.h"

namespace whittle::cuda {
namespace {

// --- Conv and pools (2-D) -------------------------------------------------------------------

KernelOr MakeConv(const KernelInit& init) {
  Unary act;
  // The weight may be a constant or, in a training graph, an input (its dims are read per call).
  const Tensor* wt = ConstInput(init, 1);
  if (!init.AllFloat32() || !FusedKind(init.attrs, &act) || (wt && wt->rank() != 4) || !NotKnownOtherThan4d(init, {0, 1}) ||
      !TwoD(init.attrs, "pads", 4) ||
      !TwoD(init.attrs, "strides", 2) || !TwoD(init.attrs, "dilations", 2) ||
      !TwoD(init.attrs, "kernel_shape", 2))
    return KernelOr(nullptr);
  const AttributeMap at = init.attrs;
  const int64_t group = at.GetInt("group", 1);
  if (group < 1 || (wt && wt->dim(0) % group != 0) || init.input_dtypes.size() > 4) return KernelOr(nullptr);
  const Precision precision = init.precision;
  return Kernel([=](KernelContext& ctx) -> Status {
    const Tensor& x = *ctx.inputs[0];
    const Tensor& w = *ctx.inputs[1];
    const Tensor* bias = ctx.inputs.size() > 2 ? ctx.inputs[2] : nullptr;
    // The runtime's residual fusion (runtime/rewrite/fuse_conv_add.h): act(conv + b + r).
    const Tensor* residual = ctx.inputs.size() > 3 ? ctx.inputs[3] : nullptr;
    Tensor& y = *ctx.outputs[0];
    if (x.rank() != 4 || w.rank() != 4) return Unimplemented("the CUDA Conv is 2-D");
    const int64_t M = w.dim(0), Cg = w.dim(1), kh = w.dim(2), kw = w.dim(3);
    if (M % group != 0) return InvalidArgument("Conv: the weight's output channels are not a multiple of group");
    if (residual && residual->dims() != y.dims()) return Internal("Conv: the fused residual's shape differs");
    const Window2d win = WindowOf(at, kh, kw, x, y);
    const int64_t N = x.dim(0), C = x.dim(1), Mg = M / group, Kg = Cg * kh * kw, P = win.out_h * win.out_w;
    // im2col of up to `chunk` images at a time, then per group over them either one strided-
    // batched product per image (the weights shared: stride 0; a 1x1 window reads X itself) or,
    // with the columns of the images side by side, one wide product [Mg, chunk * P] into a
    // channel-major scratch that the epilogue turns back to NCHW.
    WH_ASSIGN_OR_RETURN(const ColumnPlan plan, PlanColumns(win, group, N, Kg, P));
    const bool direct = plan.direct;
    const int64_t chunk = plan.chunk;
    // On an H100 the wide product took the bundled ResNet at batch 1024 from 8.2 to 2.8 ms (with
    // the per-window im2col; per image with that im2col, 2.8 ms too, and 0.78 against 0.73 ms on
    // the CNN): one product of [Mg, Kg] x [Kg, chunk * P] instead of chunk small ones.
    const bool wide = !direct && chunk > 1;
    float* t = nullptr;
    if (wide) {
      WH_ASSIGN_OR_RETURN(void* p, Scratch(static_cast<size_t>(M * chunk * P) * sizeof(float), 1));
      t = static_cast<float*>(p);
    }
    for (int64_t n0 = 0; n0 < N; n0 += chunk) {
      const int64_t nb = std::min(chunk, N - n0);
      for (int64_t g = 0; g < group; ++g) {
        const float* col = x.data<float>() + n0 * C * P;
        const float* xg = x.data<float>() + (n0 * C + g * Cg) * win.in_h * win.in_w;
        if (!direct) {
          if (wide) LaunchIm2colWindows(xg, C * win.in_h * win.in_w, plan.col, P, nb * P, nb, Cg, win, Stream());
          else LaunchIm2col(xg, C * win.in_h * win.in_w, plan.col, Kg * P, nb, Cg, win, Stream());
          col = plan.col;
        }
        GemmCall c;
        c.M = Mg;
        c.K = Kg;
        c.A = w.data<float>() + g * Mg * Kg;
        c.lda = Kg;
        c.B = col;
        c.precision = precision;
        if (wide) {  // t [M, nb, P]: group g's rows [Mg, nb * P] = W_g [Mg, Kg] col [Kg, nb * P]
          c.N = c.ldb = c.ldc = nb * P;
          c.C = t + g * Mg * nb * P;
        } else {  // per image: y[n, g*Mg.., P] = W_g [Mg, Kg] col_n [Kg, P]
          c.N = c.ldb = c.ldc = P;
          c.stride_b = direct ? C * P : Kg * P;
          c.C = y.data<float>() + (n0 * M + g * Mg) * P;
          c.stride_c = M * P;
          c.batch = nb;
        }
        WH_RETURN_IF_ERROR(RowMajorGemm(c));
      }
      if (wide)
        LaunchChannelMajorBiasAct(t, y.data<float>() + n0 * M * P, nb, M, P, bias ? bias->data<float>() : nullptr,
                                  residual ? residual->data<float>() + n0 * M * P : nullptr, act, Stream());
    }
    if (!wide && (bias || residual || act != Unary::kIdentity))
      LaunchChannelBiasAct(y.data<float>(), N, M, P, bias ? bias->data<float>() : nullptr,
                           residual ? residual->data<float>() : nullptr, act, Stream());
    return Launched("Conv");
  });
}

// --- the data and weight gradients, and ConvTranspose (the data gradient's form) ---------------

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

Window2d WindowOf(const AttributeMap& at, int64_t k_h, int64_t k_w, const Tensor& x, const Tensor& y) {
  Window2d w;
  w.in_h = x.dim(2);
  w.in_w = x.dim(3);
  w.out_h = y.dim(2);
  w.out_w = y.dim(3);
  w.k_h = k_h;
  w.k_w = k_w;
  const std::vector<int64_t> strides = at.GetInts("strides", {1, 1}), dil = at.GetInts("dilations", {1, 1});
  w.stride_h = strides[0];
  w.stride_w = strides[1];
  w.dil_h = dil[0];
  w.dil_w = dil[1];
  const std::string auto_pad = at.GetString("auto_pad", "NOTSET");
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    const int64_t th = std::max<int64_t>(0, (w.out_h - 1) * w.stride_h + (k_h - 1) * w.dil_h + 1 - w.in_h);
    const int64_t tw = std::max<int64_t>(0, (w.out_w - 1) * w.stride_w + (k_w - 1) * w.dil_w + 1 - w.in_w);
    const bool upper = auto_pad == "SAME_UPPER";
    w.pad_top = upper ? th / 2 : th - th / 2;
    w.pad_left = upper ? tw / 2 : tw - tw / 2;
    w.pad_bottom = th - w.pad_top;
    w.pad_right = tw - w.pad_left;
  } else if (auto_pad != "VALID") {
    const std::vector<int64_t> pads = at.GetInts("pads", {0, 0, 0, 0});
    w.pad_top = pads[0];
    w.pad_left = pads[1];
    w.pad_bottom = pads[2];
    w.pad_right = pads[3];
  }
  return w;
}

StatusOr<ColumnPlan> PlanColumns(const Window2d& w, int64_t group, int64_t images, int64_t Kg, int64_t P) {
  ColumnPlan c;
  c.direct = w.k_h == 1 && w.k_w == 1 && w.stride_h == 1 && w.stride_w == 1 && w.pad_top == 0 && w.pad_left == 0 &&
             w.pad_bottom == 0 && w.pad_right == 0 && group == 1;
  if (c.direct) {
    c.chunk = std::max<int64_t>(1, images);
    return c;
  }
  c.chunk = std::max<int64_t>(1, std::min<int64_t>(images, (int64_t{64} << 20) / std::max<int64_t>(1, Kg * P)));
  WH_ASSIGN_OR_RETURN(void* s, Scratch(static_cast<size_t>(c.chunk * Kg * P) * sizeof(float)));
  c.col = static_cast<float*>(s);
  return c;
}

void RegisterConvKernels(KernelRegistry& r) {
  DeclareCudaKernel(r, "", "Conv", {DType::kFloat32}, MakeConv);
  DeclareCudaKernel(r, kWhittleDomain, "ConvGradInput", {DType::kFloat32}, MakeConvGradInput);
  DeclareCudaKernel(r, "", "ConvTranspose", {DType::kFloat32}, MakeConvTranspose);
  DeclareCudaKernel(r, kWhittleDomain, "ConvGradWeight", {DType::kFloat32}, MakeConvGradWeight);
}

}  // namespace whittle::cuda
