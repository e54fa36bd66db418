// Kernels of ai.whittle BinaryMatMul and BinaryConv (lib/ops/binary.cc): the factory reads the
// attributes and, when the packed bits, alpha and bias are constants (always, as compress-model
// writes them), checks them once at load (shapes, and padding bits zero); otherwise each call
// checks them and runs the reference kernel.
#include <memory>
#include <string>

#include "kernels/cpu/binary.h"
#include "kernels/kernel.h"
#include "kernels/reference/binary.h"

namespace whittle {
namespace {

const BackendTable<BinaryFns> kBinary{{Backend::kReference, &reference::kBinaryFns}, {Backend::kCpu, &cpu::kBinaryFns}};

template <class Attrs, class Member>
KernelOr MakeChecked(const KernelInit& init, const BinaryAttrs& b, const Attrs& a, Member member) {
  const bool consts = init.const_inputs.size() > 2 && init.const_inputs[1] && init.const_inputs[2] &&
                      (init.input_dtypes.size() < 4 || init.input_dtypes[3] == DType::kUndefined ||
                       (init.const_inputs.size() > 3 && init.const_inputs[3]));
  if (!init.input_dtypes.empty() && init.input_dtypes[0] != DType::kFloat32)
    return InvalidArgument(init.node_name + ": the input must be float32, got " + DTypeName(init.input_dtypes[0]));
  if (consts) {
    const Tensor* bias = init.const_inputs.size() > 3 ? init.const_inputs[3] : nullptr;
    Status s = CheckBinaryTensors(b, *init.const_inputs[1], *init.const_inputs[2], bias, true);
    if (!s.ok()) return InvalidArgument(init.node_name + ": " + s.message());
    return kBinary.Make(init.backend, member, a, init);
  }
  // Computed bits, alpha or bias (not what compress-model writes): checked on every call.
  WH_ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> inner, kBinary.Make(Backend::kReference, member, a, init));
  const std::string name = init.node_name;
  std::shared_ptr<OpKernel> k(std::move(inner));
  return WrapFnKernel([b, k, name](KernelContext& ctx) -> Status {
    Status s = CheckBinaryTensors(b, *ctx.inputs[1], *ctx.inputs[2], ctx.inputs.size() > 3 ? ctx.inputs[3] : nullptr, true);
    if (!s.ok()) return InvalidArgument(name + ": " + s.message());
    return k->Compute(ctx);
  });
}

StatusOr<BinaryAttrs> ReadCommon(const KernelInit& init, const char* n_name, int64_t k) {
  BinaryAttrs b;
  b.n = init.attrs.GetInt(n_name, 0);
  b.k = k;
  auto act = ParseBinaryActivations(init.attrs.GetString("activations", "float"));
  if (!act.ok()) return InvalidArgument(init.node_name + ": " + act.status().message());
  b.binary = *act;
  const std::string fused = init.attrs.GetString("_activation", "");
  if (!fused.empty() && fused != "Relu")
    return InvalidArgument(init.node_name + ": a binary layer takes only a fused Relu, got \"" + fused + "\"");
  b.relu = !fused.empty();
  if (b.n < 1 || b.k < 1)
    return InvalidArgument(init.node_name + ": " + n_name + " and the contracted size must be >= 1, got " +
                           std::to_string(b.n) + " and " + std::to_string(b.k));
  return b;
}

KernelOr MakeBinaryMatMul(const KernelInit& init) {
  WH_ASSIGN_OR_RETURN(BinaryAttrs b, ReadCommon(init, "out_features", init.attrs.GetInt("in_features", 0)));
  return MakeChecked(init, b, b, &BinaryFns::matmul);
}

KernelOr MakeBinaryConv(const KernelInit& init) {
  BinaryConvAttrs a;
  auto w = ParseWindowAttrs(init.attrs);
  if (!w.ok()) return InvalidArgument(init.node_name + ": " + w.status().message());
  a.window = *w;
  a.in_channels = init.attrs.GetInt("in_channels", 0);
  a.group = init.attrs.GetInt("group", 1);
  const int64_t m = init.attrs.GetInt("out_channels", 0);
  if (a.window.kernel_shape.size() != 2 || a.group < 1 || a.in_channels < 1 || a.in_channels % a.group != 0 ||
      m % a.group != 0)
    return InvalidArgument(init.node_name + ": BinaryConv needs a 2-D kernel_shape and a group dividing in_channels (" +
                           std::to_string(a.in_channels) + ") and out_channels (" + std::to_string(m) + ")");
  const int64_t k = a.in_channels / a.group * a.window.kernel_shape[0] * a.window.kernel_shape[1];
  WH_ASSIGN_OR_RETURN(a.b, ReadCommon(init, "out_channels", k));
  return MakeChecked(init, a.b, a, &BinaryFns::conv);
}

// SignSte (lib/ops/binary.cc): +1 / -1 by x >= 0, one loop for every backend.
KernelOr MakeSignSte(const KernelInit& init) {
  if (!init.input_dtypes.empty() && init.input_dtypes[0] != DType::kFloat32)
    return InvalidArgument(init.node_name + ": SignSte supports float32 only");
  return WrapFnKernel([](KernelContext& ctx) {
    const float* x = ctx.inputs[0]->data<float>();
    float* y = ctx.outputs[0]->data<float>();
    for (int64_t i = 0; i < ctx.inputs[0]->numel(); ++i) y[i] = x[i] >= 0.f ? 1.f : -1.f;
    return Status::Ok();
  });
}

}  // namespace

void RegisterBinaryKernels(KernelRegistry& r) {
  r.Add(DeclareKernel(Backend::kReference, kWhittleDomain, "SignSte", {DType::kFloat32}, MakeSignSte));  // every backend
  DeclareFamily(r, kBinary, &BinaryFns::matmul, kWhittleDomain, "BinaryMatMul", {DType::kFloat32}, MakeBinaryMatMul);
  DeclareFamily(r, kBinary, &BinaryFns::conv, kWhittleDomain, "BinaryConv", {DType::kFloat32}, MakeBinaryConv);
}

}  // namespace whittle
