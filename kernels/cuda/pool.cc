// The CUDA backend's 2-D MaxPool (float32, and int8/uint8 data), AveragePool and
// GlobalAveragePool (float32), and the training graph's MaxPoolGrad and AveragePoolGrad.
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/pool.h"
#include "kernels/kernel.h"
#include "lib/ir/domain.h"

namespace whittle::cuda {
namespace {

KernelOr MakePool(const KernelInit& init, bool max) {
  const std::vector<int64_t> ks = init.attrs.GetInts("kernel_shape", {});
  const DType xdt = init.input_dtypes.empty() ? DType::kUndefined : init.input_dtypes[0];
  const bool bytes = max && (xdt == DType::kUInt8 || xdt == DType::kInt8);  // MaxPool on int8 data (opset 12+)
  if (!(init.AllFloat32() || bytes) || init.num_outputs != 1 || ks.size() != 2 || !NotKnownOtherThan4d(init, {0}) ||
      !TwoD(init.attrs, "pads", 4) ||
      !TwoD(init.attrs, "strides", 2) || !TwoD(init.attrs, "dilations", 2))
    return KernelOr(nullptr);
  const AttributeMap at = init.attrs;
  const bool include_pad = at.GetInt("count_include_pad", 0) != 0;
  return Kernel([=](KernelContext& ctx) -> Status {
    const Tensor& x = *ctx.inputs[0];
    Tensor& y = *ctx.outputs[0];
    if (x.rank() != 4) return Unimplemented("the CUDA pools are 2-D");
    const Window2d w = WindowOf(at, ks[0], ks[1], x, y);
    if (bytes) {
      LaunchMaxPool2dBytes(x.raw_data(), y.raw_data(), xdt == DType::kUInt8, x.dim(0) * x.dim(1), w, Stream());
    } else if (max) {
      LaunchMaxPool2d(x.data<float>(), y.data<float>(), x.dim(0) * x.dim(1), w, Stream());
    } else {
      LaunchAveragePool2d(x.data<float>(), y.data<float>(), x.dim(0) * x.dim(1), w, include_pad, Stream());
    }
    return Launched("a pool");
  });
}

KernelOr MakeGlobalAveragePool(const KernelInit& init) {
  if (!init.AllFloat32()) return KernelOr(nullptr);
  return Kernel([](KernelContext& ctx) -> Status {
    const Tensor& x = *ctx.inputs[0];
    if (x.rank() < 3) return InvalidArgument("GlobalAveragePool needs [N, C, spatial...]");
    const int64_t planes = x.dim(0) * x.dim(1);
    LaunchGlobalAveragePool(x.data<float>(), ctx.outputs[0]->data<float>(), planes, x.numel() / std::max<int64_t>(1, planes),
                            Stream());
    return Launched("GlobalAveragePool");
  });
}

// MaxPoolGrad and AveragePoolGrad (ai.whittle; lib/ops/grad.cc).
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

}  // namespace

void RegisterPoolKernels(KernelRegistry& r) {
  DeclareCudaKernel(r, "", "MaxPool", {DType::kFloat32, DType::kUInt8, DType::kInt8},
                    [](const KernelInit& i) { return MakePool(i, true); });
  DeclareCudaKernel(r, "", "AveragePool", {DType::kFloat32}, [](const KernelInit& i) { return MakePool(i, false); });
  DeclareCudaKernel(r, "", "GlobalAveragePool", {DType::kFloat32}, MakeGlobalAveragePool);
  DeclareCudaKernel(r, kWhittleDomain, "MaxPoolGrad", {DType::kFloat32}, PoolGradOp(true));
  DeclareCudaKernel(r, kWhittleDomain, "AveragePoolGrad", {DType::kFloat32}, PoolGradOp(false));
}

}  // namespace whittle::cuda
