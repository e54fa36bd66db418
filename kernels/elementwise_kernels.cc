// Registration of the element-wise kernels. Factories read the attributes and check the input
// element types they know at load time, then pick init.backend's compute function from
// kElementwise (one row per backend); Compute dispatches on the runtime dtype.
// float16/bfloat16 tensors are computed in float32 (ew::RunWithHalfAsFloat) except by Cast,
// CastLike and Where, which handle them natively.
#include <optional>
#include <string>
#include <utility>

#include "kernels/common/dtype_dispatch.h"
#include "kernels/common/elementwise_ops.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/kernel.h"
#include "kernels/reference/elementwise.h"

namespace whittle {
namespace {

using reference::BinaryOp;
using reference::ElementwiseFns;
using reference::UnaryOp;
using ew::TypeSet;

const BackendTable<ElementwiseFns> kElementwise{{Backend::kReference, &reference::kElementwiseFns},
                                                {Backend::kCpu, &cpu::kElementwiseFns}};

Status NeedInputs(const KernelContext& ctx, size_t n) {
  if (ctx.inputs.size() < n || ctx.outputs.empty() || !ctx.outputs[0]) return Internal("missing output");
  for (size_t i = 0; i < n; ++i)
    if (!ctx.inputs[i]) return InvalidArgument("required input " + std::to_string(i) + " is missing");
  return Status::Ok();
}

Status CheckBool(const KernelInit& init, size_t i, const char* op) {
  if (i < init.input_dtypes.size() && init.input_dtypes[i] != DType::kUndefined && init.input_dtypes[i] != DType::kBool)
    return Unimplemented(std::string(op) + ": input " + std::to_string(i) + " must be bool, got " +
                         DTypeName(init.input_dtypes[i]));
  return Status::Ok();
}

// Fixed BinaryOp, or one chosen from the attributes (Mod's fmod, BitShift's direction).
KernelOr MakeBinary(const KernelInit& init, BinaryOp op) {
  const char* name = reference::BinaryOpName(op);
  if (op == BinaryOp::kMod) {
    if (init.attrs.GetInt("fmod", 0) != 0) op = BinaryOp::kFmod;
    const DType t = init.input_dtypes.empty() ? DType::kUndefined : init.input_dtypes[0];
    if (op == BinaryOp::kMod && init.opset > 0 && init.opset < 28 &&
        (t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kFloat16 || t == DType::kBFloat16))
      return InvalidArgument("Mod: fmod must be 1 for floating-point inputs before opset 28");
  }
  if (op == BinaryOp::kBitShiftLeft && init.attrs.GetString("direction", "LEFT") == "RIGHT")
    op = BinaryOp::kBitShiftRight;
  for (size_t i = 0; i < 2; ++i) {
    if (reference::IsLogical(op)) {
      WH_RETURN_IF_ERROR(CheckBool(init, i, name));
    } else {
      const TypeSet set = reference::IsCompare(op)                                                   ? TypeSet::kNumericBool
                          : (op == BinaryOp::kBitShiftLeft || op == BinaryOp::kBitShiftRight) ? TypeSet::kInteger
                                                                                                : TypeSet::kNumeric;
      WH_RETURN_IF_ERROR(ew::CheckDType(init, static_cast<int>(i), set, name));
    }
  }
  const reference::BinaryFn binary = kElementwise.Pick(init.backend, &ElementwiseFns::binary);
  return MakeFnKernel([op, binary](KernelContext& ctx) -> Status {
    WH_RETURN_IF_ERROR(NeedInputs(ctx, 2));
    return ew::RunWithHalfAsFloat(ctx, [op, binary](KernelContext& c) {
      return binary(op, *c.inputs[0], *c.inputs[1], *c.outputs[0], c.num_threads);
    });
  });
}

KernelOr MakeVariadic(const KernelInit& init, BinaryOp op, bool mean) {
  for (size_t i = 0; i < init.input_dtypes.size(); ++i)
    WH_RETURN_IF_ERROR(ew::CheckDType(init, static_cast<int>(i), TypeSet::kNumeric, reference::BinaryOpName(op)));
  const reference::VariadicFn variadic = kElementwise.Pick(init.backend, &ElementwiseFns::variadic);
  return MakeFnKernel([op, mean, variadic](KernelContext& ctx) -> Status {
    WH_RETURN_IF_ERROR(NeedInputs(ctx, 1));
    return ew::RunWithHalfAsFloat(ctx, [op, mean, variadic](KernelContext& c) -> Status {
      std::vector<const Tensor*> ins;
      for (const Tensor* t : c.inputs)
        if (t) ins.push_back(t);
      return variadic(op, mean, ins, *c.outputs[0], c.num_threads);
    });
  });
}

KernelOr MakeUnary(const KernelInit& init, UnaryOp op) {
  const char* name = reference::UnaryOpName(op);
  if (op == UnaryOp::kNot) WH_RETURN_IF_ERROR(CheckBool(init, 0, name));
  else WH_RETURN_IF_ERROR(ew::CheckDType(init, 0, reference::UnaryAcceptsIntegers(op) ? TypeSet::kNumeric : TypeSet::kFloat, name));
  const reference::UnaryParams p = ew::ReadUnaryParams(op, init.attrs);
  if (op == UnaryOp::kCelu && p.alpha == 0.f) return InvalidArgument("Celu: alpha must not be 0");
  const reference::UnaryFn unary = kElementwise.Pick(init.backend, &ElementwiseFns::unary);
  return MakeFnKernel([op, p, unary](KernelContext& ctx) -> Status {
    WH_RETURN_IF_ERROR(NeedInputs(ctx, 1));
    return ew::RunWithHalfAsFloat(ctx, [op, p, unary](KernelContext& c) {
      return unary(op, p, *c.inputs[0], *c.outputs[0], c.num_threads);
    });
  });
}

KernelOr MakeClip(const KernelInit& init) {
  WH_RETURN_IF_ERROR(ew::CheckDType(init, 0, TypeSet::kNumeric, "Clip"));
  std::optional<float> lo, hi;
  if (init.opset < 11) {
    if (init.attrs.Has("min")) lo = init.attrs.GetFloat("min", 0.f);
    if (init.attrs.Has("max")) hi = init.attrs.GetFloat("max", 0.f);
  }
  const reference::ClipFn clip = kElementwise.Pick(init.backend, &ElementwiseFns::clip);
  return MakeFnKernel([lo, hi, clip](KernelContext& ctx) -> Status {
    WH_RETURN_IF_ERROR(NeedInputs(ctx, 1));
    return ew::RunWithHalfAsFloat(ctx, [lo, hi, clip](KernelContext& c) {
      const Tensor* tlo = c.inputs.size() > 1 ? c.inputs[1] : nullptr;
      const Tensor* thi = c.inputs.size() > 2 ? c.inputs[2] : nullptr;
      return clip(*c.inputs[0], tlo, thi, lo, hi, *c.outputs[0], c.num_threads);
    });
  });
}

KernelOr MakeCast(const KernelInit& init, bool like) {
  if (!like) {
    const int64_t to = init.attrs.GetInt("to", 0);
    if (to < 0 || to > 0xffff || !IsSupportedDType(static_cast<int32_t>(to)))
      return Unimplemented("Cast: unsupported target type " + std::to_string(to));
  }
  for (size_t i = 0; i < init.input_dtypes.size(); ++i)
    WH_RETURN_IF_ERROR(ew::CheckDType(init, static_cast<int>(i), TypeSet::kAll, like ? "CastLike" : "Cast"));
  const reference::CastFn cast = kElementwise.Pick(init.backend, &ElementwiseFns::cast);
  return MakeFnKernel([cast](KernelContext& ctx) -> Status {
    WH_RETURN_IF_ERROR(NeedInputs(ctx, 1));
    return cast(*ctx.inputs[0], *ctx.outputs[0], ctx.num_threads);
  });
}

KernelOr MakeWhere(const KernelInit& init) {
  WH_RETURN_IF_ERROR(CheckBool(init, 0, "Where"));
  const reference::WhereFn where = kElementwise.Pick(init.backend, &ElementwiseFns::where);
  return MakeFnKernel([where](KernelContext& ctx) -> Status {
    WH_RETURN_IF_ERROR(NeedInputs(ctx, 3));
    return where(*ctx.inputs[0], *ctx.inputs[1], *ctx.inputs[2], *ctx.outputs[0], ctx.num_threads);
  });
}

// Input 0's element types of a declaration (float16/bfloat16 computed in float32).
std::vector<DType> BinaryTypes(BinaryOp op) {
  if (reference::IsLogical(op)) return {DType::kBool};
  if (op == BinaryOp::kBitShiftLeft) return kIntegerTypes;
  if (reference::IsCompare(op)) {
    std::vector<DType> t = kNumericHalfTypes;
    t.push_back(DType::kBool);
    return t;
  }
  return kNumericHalfTypes;
}

std::vector<DType> UnaryTypes(UnaryOp op) {
  if (op == UnaryOp::kNot) return {DType::kBool};
  return reference::UnaryAcceptsIntegers(op) ? kNumericHalfTypes : kFloatHalfTypes;
}

}  // namespace

void RegisterElementwiseKernels(KernelRegistry& r) {
  const std::pair<const char*, BinaryOp> binary[] = {
      {"Add", BinaryOp::kAdd}, {"Sub", BinaryOp::kSub}, {"Mul", BinaryOp::kMul}, {"Div", BinaryOp::kDiv},
      {"Pow", BinaryOp::kPow}, {"Mod", BinaryOp::kMod}, {"PRelu", BinaryOp::kPRelu},
      {"BitShift", BinaryOp::kBitShiftLeft}, {"Equal", BinaryOp::kEqual}, {"Greater", BinaryOp::kGreater},
      {"Less", BinaryOp::kLess}, {"GreaterOrEqual", BinaryOp::kGreaterEqual}, {"LessOrEqual", BinaryOp::kLessEqual},
      {"And", BinaryOp::kAnd}, {"Or", BinaryOp::kOr}, {"Xor", BinaryOp::kXor}};
  const std::pair<const char*, std::pair<BinaryOp, bool>> variadic[] = {{"Max", {BinaryOp::kMax, false}},
                                                                        {"Min", {BinaryOp::kMin, false}},
                                                                        {"Sum", {BinaryOp::kAdd, false}},
                                                                        {"Mean", {BinaryOp::kAdd, true}}};
  for (const auto& [name, op] : binary)
    DeclareFamily(r, kElementwise, &ElementwiseFns::binary, "", name, BinaryTypes(op),
                  [op = op](const KernelInit& init) { return MakeBinary(init, op); });
  for (const ew::UnaryOpInfo& u : ew::kUnaryOps) {
    if (u.op == UnaryOp::kGelu) continue;  // below: its attribute picks the formula
    DeclareFamily(r, kElementwise, &ElementwiseFns::unary, "", u.name, UnaryTypes(u.op),
                  [op = u.op](const KernelInit& init) { return MakeUnary(init, op); });
  }
  for (const auto& [name, v] : variadic)
    DeclareFamily(r, kElementwise, &ElementwiseFns::variadic, "", name, kNumericHalfTypes,
                  [v = v](const KernelInit& init) { return MakeVariadic(init, v.first, v.second); });
  DeclareFamily(r, kElementwise, &ElementwiseFns::unary, "", "Gelu", kFloatHalfTypes, [](const KernelInit& init) {
    return MakeUnary(init, init.attrs.GetString("approximate", "none") == "tanh" ? UnaryOp::kGeluTanh : UnaryOp::kGelu);
  });
  DeclareFamily(r, kElementwise, &ElementwiseFns::clip, "", "Clip", kNumericHalfTypes, MakeClip);
  DeclareFamily(r, kElementwise, &ElementwiseFns::cast, "", "Cast", kAllTypes, [](const KernelInit& init) { return MakeCast(init, false); });
  DeclareFamily(r, kElementwise, &ElementwiseFns::cast, "", "CastLike", kAllTypes, [](const KernelInit& init) { return MakeCast(init, true); });
  DeclareFamily(r, kElementwise, &ElementwiseFns::where, "", "Where", {DType::kBool}, MakeWhere);
}

}  // namespace whittle
