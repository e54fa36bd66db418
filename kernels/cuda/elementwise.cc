// The CUDA backend's element-wise kernels (float32): the unary activations, Clip, and the
// numpy-broadcast binary ops with an optional fused Relu, and ReluGrad; launchers in
// kernels/cuda/elementwise.h, formulas in kernels/common/elementwise_ops.h (shared with the
// reference and CPU kernels).
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/common/elementwise_fns.h"
#include "kernels/kernel.h"
#include "lib/ir/domain.h"

namespace whittle::cuda {
namespace {

// The op's formula (kernels/common/elementwise_ops.h) with its attributes or ONNX's defaults.
MakeFn UnaryOpKernel(reference::UnaryOp op) {
  return [op](const KernelInit& init) -> KernelOr {
    if (!init.AllFloat32() || init.input_dtypes.size() != 1) return KernelOr(nullptr);
    const reference::UnaryParams p = ew::ReadUnaryParams(op, init.attrs);
    if (op == reference::UnaryOp::kCelu && p.alpha == 0.f) return KernelOr(nullptr);  // the CPU's error
    return Kernel([op, p](KernelContext& ctx) {
      LaunchUnaryOp(op, p, ctx.inputs[0]->data<float>(), ctx.outputs[0]->data<float>(), ctx.inputs[0]->numel(),
                    Stream());
      return Launched("an element-wise kernel");
    });
  };
}

// Clip of float32 x: the bounds from the attributes (opset < 11) or the optional scalar inputs,
// read on the host (HostInputs); an absent bound does not clip.
KernelOr MakeClip(const KernelInit& init) {
  if (!init.AllFloat32() || init.num_outputs != 1) return KernelOr(nullptr);
  const bool attrs = init.opset < 11;
  const float lo_attr = init.attrs.GetFloat("min", -INFINITY), hi_attr = init.attrs.GetFloat("max", INFINITY);
  return Kernel(
      [attrs, lo_attr, hi_attr](KernelContext& ctx) -> Status {
        float lo = -INFINITY, hi = INFINITY;
        if (attrs) {
          lo = lo_attr, hi = hi_attr;
        } else {
          for (size_t k = 1; k < 3 && k < ctx.inputs.size(); ++k) {
            const Tensor* b = ctx.inputs[k];
            if (!b) continue;
            if (b->numel() != 1) return InvalidArgument("Clip bounds must be scalars, got shape " + DimsToString(b->dims()));
            (k == 1 ? lo : hi) = b->data<float>()[0];
          }
        }
        LaunchUnary(Unary::kClip, ctx.inputs[0]->data<float>(), ctx.outputs[0]->data<float>(), ctx.inputs[0]->numel(),
                    lo, Stream(), hi);
        return Launched("Clip");
      },
      attrs ? 0 : 0b110);
}

MakeFn BinaryOpKernel(reference::BinaryOp op) {
  return [op](const KernelInit& init) -> KernelOr {
    Unary act;
    if (!init.AllFloat32() || init.input_dtypes.size() != 2 || !FusedKind(init.attrs, &act)) return KernelOr(nullptr);
    return Kernel([op, act](KernelContext& ctx) -> Status {
      const Tensor& a = *ctx.inputs[0];
      const Tensor& b = *ctx.inputs[1];
      Tensor& y = *ctx.outputs[0];
      BroadcastShape s;
      s.rank = std::max(1, y.rank());
      if (y.rank() > kMaxRank) return Unimplemented("CUDA element-wise ops take up to 8 dims");
      Dims out = y.dims();
      if (out.empty()) out = {1};
      for (int d = 0; d < s.rank; ++d) s.dims[d] = out[static_cast<size_t>(d)];
      BroadcastStrides(a.dims(), out, s.a_strides);
      BroadcastStrides(b.dims(), out, s.b_strides);
      LaunchBinary(op, a.data<float>(), b.data<float>(), y.data<float>(), s, y.numel(), act, Stream());
      return Launched("a broadcast kernel");
    });
  };
}

// ReluGrad (ai.whittle; lib/ops/grad.cc): dX = Y > 0 ? dY : 0.
KernelOr MakeReluGrad(const KernelInit& init) {
  if (!init.AllFloat32()) return KernelOr(nullptr);
  return Kernel([](KernelContext& ctx) -> Status {
    const Tensor& y = *ctx.inputs[0];
    if (ctx.inputs[1]->numel() != y.numel()) return InvalidArgument("ReluGrad: Y and dY differ in size");
    LaunchReluGrad(y.data<float>(), ctx.inputs[1]->data<float>(), ctx.outputs[0]->data<float>(), y.numel(), Stream());
    return Launched("ReluGrad");
  });
}

}  // namespace

void RegisterElementwiseKernels(KernelRegistry& r) {
  const std::vector<DType> f32 = {DType::kFloat32};
  // Every unary op of float32 (Not, IsNaN and IsInf change the element type).
  for (const ew::UnaryOpInfo& u : ew::kUnaryOps) {
    if (u.types == ew::UnaryTypes::kBool || u.types == ew::UnaryTypes::kFloatToBool || u.op == reference::UnaryOp::kGelu)
      continue;
    DeclareCudaKernel(r, "", u.name, f32, UnaryOpKernel(u.op));
  }
  // Gelu (opset 20; also what runtime/rewrite/fuse_gelu.h makes of exported erf patterns).
  DeclareCudaKernel(r, "", "Gelu", f32, [](const KernelInit& i) {
    return UnaryOpKernel(i.attrs.GetString("approximate", "none") == "tanh" ? reference::UnaryOp::kGeluTanh
                                                                             : reference::UnaryOp::kGelu)(i);
  });
  using reference::BinaryOp;
  const std::pair<const char*, BinaryOp> binary[] = {{"Add", BinaryOp::kAdd}, {"Sub", BinaryOp::kSub},
                                                     {"Mul", BinaryOp::kMul}, {"Div", BinaryOp::kDiv},
                                                     {"Pow", BinaryOp::kPow}, {"PRelu", BinaryOp::kPRelu},
                                                     {"Max", BinaryOp::kMax}, {"Min", BinaryOp::kMin}};  // Max/Min: two inputs
  for (const auto& [op, b] : binary) DeclareCudaKernel(r, "", op, f32, BinaryOpKernel(b));
  DeclareCudaKernel(r, "", "Clip", f32, MakeClip);
  DeclareCudaKernel(r, kWhittleDomain, "ReluGrad", {DType::kFloat32}, MakeReluGrad);
}

}  // namespace whittle::cuda
