// OpDefs of the element-wise family: broadcasting binary arithmetic, comparisons and logic,
// variadic Max/Min/Sum/Mean, Where, unary math and activations, Clip, Cast and CastLike.
// Broadcasting is numpy's (opset >= 7); the legacy opset < 7 `axis` broadcast attribute is
// rejected, while `broadcast` = 1 without `axis` is a suffix match, which numpy rules cover.
#include <string>
#include <vector>

#include "lib/ops/op_def.h"
#include "lib/ops/shape_helpers.h"

namespace whittle {
namespace {

enum class Types { kNumeric, kFloat, kInteger, kBool, kNumericOrBool, kAny };

bool IsFloatDType(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kFloat16 || t == DType::kBFloat16;
}
bool IsIntegerDType(DType t) {
  switch (t) {
    case DType::kInt8: case DType::kInt16: case DType::kInt32: case DType::kInt64:
    case DType::kUInt8: case DType::kUInt16: case DType::kUInt32: case DType::kUInt64: return true;
    default: return false;
  }
}

bool Allowed(DType t, Types types) {
  switch (types) {
    case Types::kNumeric: return IsFloatDType(t) || IsIntegerDType(t);
    case Types::kFloat: return IsFloatDType(t);
    case Types::kInteger: return IsIntegerDType(t);
    case Types::kBool: return t == DType::kBool;
    case Types::kNumericOrBool: case Types::kAny: return IsFloatDType(t) || IsIntegerDType(t) || t == DType::kBool;
  }
  return false;
}

const char* TypesName(Types types) {
  switch (types) {
    case Types::kNumeric: return "a numeric";
    case Types::kFloat: return "a floating-point";
    case Types::kInteger: return "an integer";
    case Types::kBool: return "a bool";
    case Types::kNumericOrBool: case Types::kAny: return "a numeric or bool";
  }
  return "?";
}

// Unknown dtypes (kUndefined) pass: they are checked again once known.
Status CheckInputType(const InferContext& ctx, int i, Types types) {
  if (!ctx.HasInput(i)) return Status::Ok();
  const DType t = ctx.InputDType(i);
  if (t == DType::kUndefined || Allowed(t, types)) return Status::Ok();
  return ctx.Error("input " + std::to_string(i) + " must be " + TypesName(types) + " tensor, got " + DTypeName(t));
}

Status CheckSameType(const InferContext& ctx, int i, int j) {
  const DType a = ctx.InputDType(i), b = ctx.InputDType(j);
  if (a == DType::kUndefined || b == DType::kUndefined || a == b) return Status::Ok();
  return ctx.Error("inputs " + std::to_string(i) + " and " + std::to_string(j) + " must have the same element type, got " +
                   DTypeName(a) + " and " + DTypeName(b));
}

std::vector<AttrSpec> LegacyAttrs() {
  return {{"broadcast", AttrType::kInt}, {"axis", AttrType::kInt}, {"consumed_inputs", AttrType::kInts}};
}

Status CheckLegacyBroadcast(const Node& node, int) {
  if (node.attrs.Has("axis"))
    return Unimplemented(node.DebugName() + ": the opset < 7 'axis' broadcast attribute is not supported");
  return Status::Ok();
}

// Binary and variadic ops whose inputs share one element type.
OpDef Broadcasting(const std::string& op, Types types, bool bool_output, int max_inputs = 2) {
  OpDef d;
  d.op_type = op;
  d.min_inputs = max_inputs == 2 ? 2 : 1;
  d.max_inputs = max_inputs;
  d.attrs = LegacyAttrs();
  d.check = CheckLegacyBroadcast;
  d.infer = [types, bool_output](InferContext& ctx) -> Status {
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      WH_RETURN_IF_ERROR(CheckInputType(ctx, i, types));
      WH_RETURN_IF_ERROR(CheckSameType(ctx, 0, i));
    }
    WH_ASSIGN_OR_RETURN(std::optional<SymShape> s, BroadcastInputs(ctx));
    ctx.SetOutput(0, bool_output ? DType::kBool : ctx.InputDType(0), s);
    return Status::Ok();
  };
  return d;
}

OpDef UnaryDef(const std::string& op, Types types, std::vector<AttrSpec> attrs = {}, bool bool_output = false) {
  OpDef d;
  d.op_type = op;
  d.attrs = std::move(attrs);
  d.attrs.push_back({"consumed_inputs", AttrType::kInts});
  d.infer = [types, bool_output](InferContext& ctx) -> Status {
    WH_RETURN_IF_ERROR(CheckInputType(ctx, 0, types));
    WH_RETURN_IF_ERROR(InferSameAsInput0(ctx));
    if (bool_output) ctx.SetOutput(0, DType::kBool, ctx.OutputShape(0));
    return Status::Ok();
  };
  return d;
}

void RegisterBinaryOps(OpRegistry& r) {
  for (const char* op : {"Add", "Sub", "Mul", "Div"}) r.Register(Broadcasting(op, Types::kNumeric, false));
  for (const char* op : {"Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual"})
    r.Register(Broadcasting(op, Types::kNumericOrBool, true));
  for (const char* op : {"And", "Or", "Xor"}) r.Register(Broadcasting(op, Types::kBool, true));
  for (const char* op : {"Max", "Min"}) r.Register(Broadcasting(op, Types::kNumeric, false, 1 << 20));
  for (const char* op : {"Sum", "Mean"}) r.Register(Broadcasting(op, Types::kFloat, false, 1 << 20));

  OpDef pow = Broadcasting("Pow", Types::kNumeric, false);
  pow.infer = [](InferContext& ctx) -> Status {
    // The exponent may have a different numeric type; the result has the base's.
    WH_RETURN_IF_ERROR(CheckInputType(ctx, 0, Types::kNumeric));
    WH_RETURN_IF_ERROR(CheckInputType(ctx, 1, Types::kNumeric));
    return InferSameAsBroadcast(ctx);
  };
  r.Register(std::move(pow));

  OpDef mod = Broadcasting("Mod", Types::kNumeric, false);
  mod.attrs = {{"fmod", AttrType::kInt}};
  mod.check = [](const Node& n, int) -> Status {
    const int64_t f = n.attrs.GetInt("fmod", 0);
    if (f != 0 && f != 1) return InvalidArgument(n.DebugName() + ": fmod must be 0 or 1, got " + std::to_string(f));
    return Status::Ok();
  };
  auto mod_infer = mod.infer;
  // Opset 28 defines fmod 0 for floats (A - floor(A / B) * B, the divisor's sign); before, the
  // spec restricted it to integers.
  mod.max_opset = 28;
  mod.infer = [mod_infer](InferContext& ctx) -> Status {
    if (IsFloatDType(ctx.InputDType(0)) && ctx.attrs().GetInt("fmod", 0) == 0 && ctx.opset() < 28)
      return ctx.Error("fmod must be 1 for floating-point inputs before opset 28");
    return mod_infer(ctx);
  };
  r.Register(std::move(mod));

  OpDef shift = Broadcasting("BitShift", Types::kInteger, false);
  shift.attrs = {{"direction", AttrType::kString, true}};
  shift.check = [](const Node& n, int) -> Status {
    const std::string d = n.attrs.GetString("direction", "");
    if (d != "LEFT" && d != "RIGHT")
      return InvalidArgument(n.DebugName() + ": direction must be LEFT or RIGHT, got '" + d + "'");
    return Status::Ok();
  };
  shift.max_opset = 28;  // 28: signed types (arithmetic right shift) and out-of-range shift amounts defined
  r.Register(std::move(shift));

  OpDef prelu = Broadcasting("PRelu", Types::kNumeric, false);
  prelu.infer = [](InferContext& ctx) -> Status {
    WH_RETURN_IF_ERROR(CheckInputType(ctx, 0, Types::kNumeric));
    WH_RETURN_IF_ERROR(CheckSameType(ctx, 0, 1));
    const SymShape* x = ctx.InputShape(0);
    const SymShape* slope = ctx.InputShape(1);
    if (x && slope) {
      // Unidirectional: slope broadcasts to X, never the other way.
      auto b = BroadcastShapes(*x, *slope);
      if (!b.ok() || b->size() != x->size()) return ctx.Error("slope shape " + SymShapeToString(*slope) +
                                                              " does not broadcast to X shape " + SymShapeToString(*x));
      for (size_t i = 0; i < x->size(); ++i)
        if ((*x)[i].known() && (*b)[i].known() && (*x)[i].value != (*b)[i].value)
          return ctx.Error("slope shape " + SymShapeToString(*slope) + " does not broadcast to X shape " +
                           SymShapeToString(*x));
    }
    return InferSameAsInput0(ctx);
  };
  r.Register(std::move(prelu));

  OpDef where;
  where.op_type = "Where";
  where.min_inputs = where.max_inputs = 3;
  where.infer = [](InferContext& ctx) -> Status {
    WH_RETURN_IF_ERROR(CheckInputType(ctx, 0, Types::kBool));
    WH_RETURN_IF_ERROR(CheckSameType(ctx, 1, 2));
    WH_ASSIGN_OR_RETURN(std::optional<SymShape> s, BroadcastInputs(ctx));
    ctx.SetOutput(0, ctx.InputDType(1), s);
    return Status::Ok();
  };
  r.Register(std::move(where));
}

void RegisterUnaryOps(OpRegistry& r) {
  for (const char* op : {"Neg", "Abs", "Sign", "Relu"}) r.Register(UnaryDef(op, Types::kNumeric));
  r.Register(UnaryDef("Not", Types::kBool));
  for (const char* op : {"Sqrt", "Exp", "Log", "Erf", "Reciprocal", "Floor", "Ceil", "Round", "Sin", "Cos", "Tan",
                         "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Sigmoid", "Tanh",
                         "Softplus", "Softsign", "HardSwish"})
    r.Register(UnaryDef(op, Types::kFloat));
  for (const char* op : {"LeakyRelu", "Elu", "Celu", "ThresholdedRelu"})
    r.Register(UnaryDef(op, Types::kFloat, {{"alpha", AttrType::kFloat}}));
  r.Register(UnaryDef("Selu", Types::kFloat, {{"alpha", AttrType::kFloat}, {"gamma", AttrType::kFloat}}));
  r.Register(UnaryDef("HardSigmoid", Types::kFloat, {{"alpha", AttrType::kFloat}, {"beta", AttrType::kFloat}}));
  OpDef gelu = UnaryDef("Gelu", Types::kFloat, {{"approximate", AttrType::kString}});
  gelu.since_opset = 20;
  gelu.max_opset = 21;
  gelu.check = [](const Node& n, int) -> Status {
    const std::string a = n.attrs.GetString("approximate", "none");
    if (a != "none" && a != "tanh") return InvalidArgument(n.DebugName() + ": approximate must be 'none' or 'tanh', got '" + a + "'");
    return Status::Ok();
  };
  r.Register(std::move(gelu));
  OpDef mish = UnaryDef("Mish", Types::kFloat);
  mish.since_opset = mish.max_opset = 18;
  r.Register(std::move(mish));
  r.Register(UnaryDef("Shrink", Types::kFloat, {{"lambd", AttrType::kFloat}, {"bias", AttrType::kFloat}}));
  r.Register(UnaryDef("IsNaN", Types::kFloat, {}, true));
  r.Register(UnaryDef("IsInf", Types::kFloat, {{"detect_negative", AttrType::kInt}, {"detect_positive", AttrType::kInt}},
                      true));

  OpDef clip = UnaryDef("Clip", Types::kNumeric, {{"min", AttrType::kFloat}, {"max", AttrType::kFloat}});
  clip.max_inputs = 3;
  clip.check = [](const Node& n, int opset) -> Status {
    int n_in = static_cast<int>(n.inputs.size());
    while (n_in > 0 && n.inputs[static_cast<size_t>(n_in - 1)] < 0) --n_in;
    if (opset < 11 && n_in > 1)
      return InvalidArgument(n.DebugName() + ": min/max are attributes before opset 11, not inputs");
    if (opset >= 11 && (n.attrs.Has("min") || n.attrs.Has("max")))
      return InvalidArgument(n.DebugName() + ": min/max are inputs from opset 11, not attributes");
    return Status::Ok();
  };
  clip.infer = [](InferContext& ctx) -> Status {
    WH_RETURN_IF_ERROR(CheckInputType(ctx, 0, Types::kNumeric));
    for (int i = 1; i < 3; ++i) {
      if (!ctx.HasInput(i)) continue;
      WH_RETURN_IF_ERROR(CheckSameType(ctx, 0, i));
      const SymShape* s = ctx.InputShape(i);
      if (s) {
        for (const Dim& d : *s)
          if (d.known() && d.value != 1) return ctx.Error("min/max must be scalars, got shape " + SymShapeToString(*s));
      }
    }
    return InferSameAsInput0(ctx);
  };
  r.Register(std::move(clip));
}

// Cast's and CastLike's float8 attributes, each checked against the opset that added it.
Status CheckCastAttrs(const Node& n, int opset) {
  if (n.attrs.Has("saturate") && opset < 19)
    return InvalidArgument(n.DebugName() + ": " + n.op_type + " has the saturate attribute from opset 19");
  if (n.attrs.Has("round_mode")) {
    if (opset < 24) return InvalidArgument(n.DebugName() + ": " + n.op_type + " has the round_mode attribute from opset 24");
    const std::string m = n.attrs.GetString("round_mode", "up");
    if (m != "up" && m != "down" && m != "nearest")
      return InvalidArgument(n.DebugName() + ": round_mode must be up, down or nearest, got '" + m + "'");
  }
  return Status::Ok();
}

// Casts from and to the packed 4-bit types are not implemented (only DequantizeLinear and
// MatMulNBits read them).
Status RefusePacked4Bit(const InferContext& ctx, int i) {
  const DType t = ctx.InputDType(i);
  if (t == DType::kInt4 || t == DType::kUInt4)
    return Unimplemented(ctx.node().DebugName() + ": " + ctx.node().op_type + " of " + DTypeName(t) +
                         " tensors is not supported");
  return Status::Ok();
}

void RegisterCastOps(OpRegistry& r) {
  // saturate (opset 19) and round_mode (24) only change casts to the float8 types, which Whittle
  // does not have (a cast to one is refused): any value means the same here.
  OpDef cast;
  cast.op_type = "Cast";
  cast.attrs = {{"to", AttrType::kInt, true}, {"saturate", AttrType::kInt}, {"round_mode", AttrType::kString}};
  cast.check = [](const Node& n, int opset) -> Status {
    WH_RETURN_IF_ERROR(CheckCastAttrs(n, opset));
    const int64_t to = n.attrs.GetInt("to", 0);
    if (to == static_cast<int64_t>(DType::kString))
      return Unimplemented(n.DebugName() + ": casts to string are not supported");
    if (to == static_cast<int64_t>(DType::kInt4) || to == static_cast<int64_t>(DType::kUInt4))
      return Unimplemented(n.DebugName() + ": casts to int4/uint4 are not supported");
    if (to < 0 || to > 0xffff || !IsSupportedDType(static_cast<int32_t>(to)))
      return Unimplemented(n.DebugName() + ": unsupported target type " + std::to_string(to) + " in 'to'");
    return Status::Ok();
  };
  cast.infer = [](InferContext& ctx) -> Status {
    WH_RETURN_IF_ERROR(RefusePacked4Bit(ctx, 0));
    WH_RETURN_IF_ERROR(CheckInputType(ctx, 0, Types::kAny));
    const DType to = static_cast<DType>(ctx.attrs().GetInt("to", 0));
    const SymShape* s = ctx.InputShape(0);
    ctx.SetOutput(0, to, s ? std::optional<SymShape>(*s) : std::nullopt);
    return Status::Ok();
  };
  r.Register(std::move(cast));

  OpDef like;
  like.op_type = "CastLike";
  like.min_inputs = like.max_inputs = 2;
  like.attrs = {{"saturate", AttrType::kInt}, {"round_mode", AttrType::kString}};
  like.check = CheckCastAttrs;
  like.infer = [](InferContext& ctx) -> Status {
    WH_RETURN_IF_ERROR(RefusePacked4Bit(ctx, 0));
    WH_RETURN_IF_ERROR(RefusePacked4Bit(ctx, 1));
    WH_RETURN_IF_ERROR(CheckInputType(ctx, 0, Types::kAny));
    WH_RETURN_IF_ERROR(CheckInputType(ctx, 1, Types::kAny));
    const SymShape* s = ctx.InputShape(0);
    ctx.SetOutput(0, ctx.InputDType(1), s ? std::optional<SymShape>(*s) : std::nullopt);
    return Status::Ok();
  };
  r.Register(std::move(like));
}

}  // namespace

void RegisterElementwiseOps(OpRegistry& r) {
  RegisterBinaryOps(r);
  RegisterUnaryOps(r);
  RegisterCastOps(r);
}

}  // namespace whittle
