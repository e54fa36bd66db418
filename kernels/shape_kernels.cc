// Kernels for the shape ops. Flatten, Reshape, Squeeze, Unsqueeze, Identity and Dropout that
// cannot train and has no mask output alias their input (zero copy: the runtime shares the buffer
// with the inferred dims). Shape, Constant and ConstantOfShape write small outputs through
// init.backend's compute function from kShape (only the reference has them: nothing to speed up);
// other Dropouts (a mask, or training possible) get init.backend's kernel from kDropout.
#include <algorithm>
#include <string>

#include "kernels/common/dropout.h"
#include "kernels/cpu/dropout.h"
#include "kernels/kernel.h"
#include "kernels/reference/dropout.h"
#include "kernels/reference/shape.h"

namespace whittle {
namespace {

const BackendTable<ShapeFns> kShape{{Backend::kReference, &reference::kShapeFns}};

StatusOr<std::unique_ptr<OpKernel>> Alias0(const KernelInit&) {
  return std::unique_ptr<OpKernel>(std::make_unique<AliasKernel>(0));
}

const BackendTable<DropoutFns> kDropout{{Backend::kReference, &reference::kDropoutFns},
                                        {Backend::kCpu, &cpu::kDropoutFns}};

// Dropout is the identity unless opset 12+ asks for training with a non-zero ratio. When
// training_mode and ratio are constants that rule it out and no mask is wanted, the output
// aliases the input; otherwise the backend's kernel decides per call (kernels/common/dropout.h).
StatusOr<std::unique_ptr<OpKernel>> MakeDropout(const KernelInit& init) {
  auto input = [&](size_t i) -> const Tensor* { return i < init.const_inputs.size() ? init.const_inputs[i] : nullptr; };
  auto present = [&](size_t i) { return i < init.input_dtypes.size() && init.input_dtypes[i] != DType::kUndefined; };
  bool may_train = false;
  if (init.opset >= 12 && present(2)) {
    may_train = true;
    if (input(2)) {
      WH_ASSIGN_OR_RETURN(bool training, DropoutTrainingMode(input(2)));
      may_train = training;
    }
    if (may_train && present(1) && input(1)) {
      WH_ASSIGN_OR_RETURN(double ratio, DropoutRatio(input(1)));
      may_train = ratio != 0.0;
    }
  }
  if (init.num_outputs < 2 && !may_train) return Alias0(init);
  WH_ASSIGN_OR_RETURN(DropoutAttrs a, ParseDropoutAttrs(init));
  return kDropout.Make(init.backend, &DropoutFns::dropout, a, init);
}

StatusOr<std::unique_ptr<OpKernel>> MakeShape(const KernelInit& init) {
  const int64_t start = init.attrs.GetInt("start", 0);
  const bool has_end = init.attrs.Has("end");
  const int64_t end = init.attrs.GetInt("end", 0);
  const auto shape = kShape.Pick(init.backend, &ShapeFns::shape);
  return WrapFnKernel([=](KernelContext& ctx) -> Status {
    const Tensor& in = *ctx.inputs[0];
    return shape(in, start, has_end ? end : in.rank(), ctx.outputs[0]);
  });
}

StatusOr<std::unique_ptr<OpKernel>> MakeConstant(const KernelInit& init) {
  WH_ASSIGN_OR_RETURN(Tensor value, ConstantFromAttrs(init.attrs));
  return WrapFnKernel([value](KernelContext& ctx) -> Status {
    Tensor* out = ctx.outputs[0];
    if (out->dtype() != value.dtype() || out->dims() != value.dims())
      return Internal("Constant output was allocated with the wrong type or shape");
    std::copy_n(static_cast<const char*>(value.raw_data()), value.nbytes(), static_cast<char*>(out->raw_data()));
    return Status::Ok();
  });
}

StatusOr<std::unique_ptr<OpKernel>> MakeConstantOfShape(const KernelInit& init) {
  Tensor value = Tensor::Scalar<float>(0.f);
  if (const Tensor* v = init.attrs.GetTensor("value")) {
    if (!v->defined() || v->numel() != 1) return InvalidArgument("attribute 'value' must hold exactly one element");
    value = *v;
  }
  const auto fill = kShape.Pick(init.backend, &ShapeFns::fill);
  return WrapFnKernel([value, fill](KernelContext& ctx) -> Status { return fill(value, ctx.outputs[0]); });
}

}  // namespace

void RegisterShapeKernels(KernelRegistry& r) {
  // Views of input 0 on every backend: one reference declaration serves them all.
  for (const char* op : {"Flatten", "Reshape", "Squeeze", "Unsqueeze", "Identity"})
    r.Add(DeclareKernel(Backend::kReference, "", op, kAllTypes, Alias0));
  DeclareFamily(r, kDropout, &DropoutFns::dropout, "", "Dropout", kFloatHalfTypes, MakeDropout);
  DeclareFamily(r, kShape, &ShapeFns::shape, "", "Shape", kAllTypes, MakeShape);
  r.Add(DeclareKernel(Backend::kReference, "", "Constant", {}, MakeConstant));
  DeclareFamily(r, kShape, &ShapeFns::fill, "", "ConstantOfShape", {DType::kInt64}, MakeConstantOfShape);
}

}  // namespace whittle
