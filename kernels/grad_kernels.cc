// Kernels for the ai.whittle gradient ops (lib/ops/grad.cc): the factory checks float32 inputs
// and parses the window attributes (ReluGrad and GatherGrad have none) once, then picks init.backend's compute
// function from kGrad (reference and CPU rows; the CUDA kernels are declared in kernels/cuda/train_ops.cc).
#include <string>

#include "kernels/cpu/grad.h"
#include "kernels/kernel.h"
#include "kernels/reference/grad.h"

namespace whittle {
namespace {

using Factory = StatusOr<std::unique_ptr<OpKernel>>;

const BackendTable<GradFns> kGrad{{Backend::kReference, &reference::kGradFns}, {Backend::kCpu, &cpu::kGradFns}};

Status CheckFloat32Inputs(const KernelInit& init, const char* op) {
  for (DType t : init.input_dtypes)
    if (t != DType::kFloat32)
      return InvalidArgument(init.node_name + ": " + op + " supports float32 only, got " + DTypeName(t));
  return Status::Ok();
}

StatusOr<WindowAttrs> ReadWindow(const KernelInit& init) {
  auto w = ParseWindowAttrs(init.attrs);
  if (!w.ok()) return InvalidArgument(init.node_name + ": " + w.status().message());
  return w;
}

StatusOr<ConvGradAttrs> ReadConvGrad(const KernelInit& init, const char* op) {
  WH_RETURN_IF_ERROR(CheckFloat32Inputs(init, op));
  ConvGradAttrs a;
  WH_ASSIGN_OR_RETURN(a.window, ReadWindow(init));
  a.group = init.attrs.GetInt("group", 1);
  if (a.group < 1) return InvalidArgument(init.node_name + ": group must be >= 1, got " + std::to_string(a.group));
  return a;
}

Factory MakeConvGradInput(const KernelInit& init) {
  WH_ASSIGN_OR_RETURN(ConvGradAttrs a, ReadConvGrad(init, "ConvGradInput"));
  const auto fn = kGrad.Pick(init.backend, &GradFns::conv_grad_input);
  return WrapFnKernel([a, fn](KernelContext& ctx) {
    return fn(a, *ctx.inputs[0], *ctx.inputs[1], *ctx.inputs[2], ctx.outputs[0], ctx.num_threads);
  });
}

Factory MakeConvGradWeight(const KernelInit& init) {
  WH_ASSIGN_OR_RETURN(ConvGradAttrs a, ReadConvGrad(init, "ConvGradWeight"));
  if (a.window.kernel_shape.empty()) return InvalidArgument(init.node_name + ": kernel_shape is required");
  const auto fn = kGrad.Pick(init.backend, &GradFns::conv_grad_weight);
  return WrapFnKernel([a, fn](KernelContext& ctx) {
    return fn(a, *ctx.inputs[0], *ctx.inputs[1], ctx.outputs[0], ctx.num_threads);
  });
}

Factory MakeMaxPoolGrad(const KernelInit& init) {
  WH_RETURN_IF_ERROR(CheckFloat32Inputs(init, "MaxPoolGrad"));
  WH_ASSIGN_OR_RETURN(WindowAttrs a, ReadWindow(init));
  if (a.kernel_shape.empty()) return InvalidArgument(init.node_name + ": kernel_shape is required");
  const auto fn = kGrad.Pick(init.backend, &GradFns::max_pool_grad);
  return WrapFnKernel([a, fn](KernelContext& ctx) {
    return fn(a, *ctx.inputs[0], *ctx.inputs[1], ctx.outputs[0], ctx.num_threads);
  });
}

Factory MakeReluGrad(const KernelInit& init) {
  WH_RETURN_IF_ERROR(CheckFloat32Inputs(init, "ReluGrad"));
  const auto fn = kGrad.Pick(init.backend, &GradFns::relu_grad);
  return WrapFnKernel(
      [fn](KernelContext& ctx) { return fn(*ctx.inputs[0], *ctx.inputs[1], ctx.outputs[0], ctx.num_threads); });
}

Factory MakeAveragePoolGrad(const KernelInit& init) {
  WH_RETURN_IF_ERROR(CheckFloat32Inputs(init, "AveragePoolGrad"));
  WH_ASSIGN_OR_RETURN(WindowAttrs a, ReadWindow(init));
  if (a.kernel_shape.empty()) return InvalidArgument(init.node_name + ": kernel_shape is required");
  const bool include_pad = init.attrs.GetInt("count_include_pad", 0) != 0;
  const auto fn = kGrad.Pick(init.backend, &GradFns::average_pool_grad);
  return WrapFnKernel([a, include_pad, fn](KernelContext& ctx) {
    return fn(a, include_pad, *ctx.inputs[0], *ctx.inputs[1], ctx.outputs[0], ctx.num_threads);
  });
}

Factory MakeGatherGrad(const KernelInit& init) {
  for (size_t i : {size_t{0}, size_t{2}})
    if (i < init.input_dtypes.size() && init.input_dtypes[i] != DType::kFloat32)
      return InvalidArgument(init.node_name + ": GatherGrad supports float32 X and dY only, got " +
                             DTypeName(init.input_dtypes[i]));
  const int64_t axis = init.attrs.GetInt("axis", 0);
  const auto fn = kGrad.Pick(init.backend, &GradFns::gather_grad);
  return WrapFnKernel([axis, fn](KernelContext& ctx) {
    return fn(axis, *ctx.inputs[0], *ctx.inputs[1], *ctx.inputs[2], ctx.outputs[0], ctx.num_threads);
  });
}

}  // namespace

void RegisterGradKernels(KernelRegistry& r) {
  DeclareFamily(r, kGrad, &GradFns::conv_grad_input, kWhittleDomain, "ConvGradInput", {DType::kFloat32}, MakeConvGradInput);
  DeclareFamily(r, kGrad, &GradFns::conv_grad_weight, kWhittleDomain, "ConvGradWeight", {DType::kFloat32}, MakeConvGradWeight);
  DeclareFamily(r, kGrad, &GradFns::max_pool_grad, kWhittleDomain, "MaxPoolGrad", {DType::kFloat32}, MakeMaxPoolGrad);
  DeclareFamily(r, kGrad, &GradFns::relu_grad, kWhittleDomain, "ReluGrad", {DType::kFloat32}, MakeReluGrad);
  DeclareFamily(r, kGrad, &GradFns::average_pool_grad, kWhittleDomain, "AveragePoolGrad", {DType::kFloat32}, MakeAveragePoolGrad);
  DeclareFamily(r, kGrad, &GradFns::gather_grad, kWhittleDomain, "GatherGrad", {DType::kFloat32}, MakeGatherGrad);
}

}  // namespace whittle
