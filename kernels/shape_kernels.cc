// Kernels for the shape ops. Flatten, Reshape, Squeeze, Unsqueeze, Identity and Dropout without a
// mask output alias their input (zero copy: the runtime shares the buffer with the inferred
// dims). Shape, Constant, ConstantOfShape and Dropout with a mask write small outputs through
// init.backend's compute function from kShape (only the reference has them: nothing to speed up).
#include <algorithm>
#include <string>

#include "kernels/kernel.h"
#include "kernels/reference/shape.h"

namespace whittle {
namespace {

const BackendTable<ShapeFns> kShape{{Backend::kReference, &reference::kShapeFns}};

StatusOr<std::unique_ptr<OpKernel>> Alias0(const KernelInit&) {
  return std::unique_ptr<OpKernel>(std::make_unique<AliasKernel>(0));
}

// True when Dropout's training_mode input is a known true, i.e. real dropout was asked for.
StatusOr<bool> TrainingRequested(const Tensor* training, const Tensor* ratio) {
  if (!training) return false;
  if (training->dtype() != DType::kBool || training->numel() != 1)
    return InvalidArgument("training_mode must be a bool scalar");
  if (!training->data<bool>()[0]) return false;
  // Training with ratio 0 keeps every element, so it is still the identity.
  if (ratio && ratio->numel() == 1) {
    if (ratio->dtype() == DType::kFloat32 && ratio->data<float>()[0] == 0.f) return false;
    if (ratio->dtype() == DType::kFloat64 && ratio->data<double>()[0] == 0.0) return false;
  }
  return true;
}

Status TrainingUnsupported() {
  return Unimplemented("Dropout with training_mode=true and a non-zero ratio is not supported (inference only)");
}

StatusOr<std::unique_ptr<OpKernel>> MakeDropout(const KernelInit& init) {
  auto input = [&](size_t i) -> const Tensor* { return i < init.const_inputs.size() ? init.const_inputs[i] : nullptr; };
  if (init.opset >= 12 && input(2)) {
    WH_ASSIGN_OR_RETURN(bool training, TrainingRequested(input(2), input(1)));
    if (training) return TrainingUnsupported();
  }
  const bool training_input = init.opset >= 12 && init.input_dtypes.size() > 2 &&
                              init.input_dtypes[2] != DType::kUndefined && !input(2);
  // The alias is only safe when nothing can ask for training at run time and no mask is wanted.
  if (init.num_outputs < 2 && !training_input) return Alias0(init);
  const int opset = init.opset;
  const auto dropout = kShape.Pick(init.backend, &ShapeFns::dropout);
  return WrapFnKernel([opset, dropout](KernelContext& ctx) -> Status {
    if (opset >= 12 && ctx.inputs.size() > 2) {
      WH_ASSIGN_OR_RETURN(bool training, TrainingRequested(ctx.inputs[2], ctx.inputs.size() > 1 ? ctx.inputs[1] : nullptr));
      if (training) return TrainingUnsupported();
    }
    return dropout(*ctx.inputs[0], ctx.outputs[0], ctx.outputs.size() > 1 ? ctx.outputs[1] : nullptr);
  });
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
  for (const char* op : {"Flatten", "Reshape", "Squeeze", "Unsqueeze", "Identity"}) r.Register("", op, Alias0);
  r.Register("", "Dropout", MakeDropout);
  r.Register("", "Shape", MakeShape);
  r.Register("", "Constant", MakeConstant);
  r.Register("", "ConstantOfShape", MakeConstantOfShape);
}

}  // namespace whittle
