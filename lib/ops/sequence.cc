// Sequences of tensors and optionals, as ONNX defines them: SequenceEmpty, SequenceConstruct,
// SequenceInsert, SequenceAt, SequenceErase, SequenceLength, ConcatFromSequence, SplitToSequence
// (opset 11+), Optional, OptionalHasElement, OptionalGetElement (15+; 18 widened the last two to
// take a tensor or a sequence too). A sequence or optional value carries its element dtype and no
// shape (its elements may differ in shape); the kernels (kernels/sequence_kernels.cc) set their
// outputs' shapes when they run.
#include "lib/ops/op_def.h"

namespace whittle {
namespace {

bool IsSequence(ValueKind k) { return k == ValueKind::kSequence; }
bool IsOptional(ValueKind k) { return k == ValueKind::kOptionalTensor || k == ValueKind::kOptionalSequence; }

Status NeedSequence(const InferContext& ctx, int i) {
  if (!IsSequence(ctx.InputKind(i)))
    return ctx.Error("input " + std::to_string(i) + " must be a sequence, got a " + ValueKindName(ctx.InputKind(i)));
  return Status::Ok();
}

Status NeedTensor(const InferContext& ctx, int i) {
  if (ctx.HasInput(i) && ctx.InputKind(i) != ValueKind::kTensor)
    return ctx.Error("input " + std::to_string(i) + " must be a tensor, got a " + ValueKindName(ctx.InputKind(i)));
  return Status::Ok();
}

// A position input (SequenceInsert, SequenceAt, SequenceErase): one int32 or int64.
Status NeedPosition(const InferContext& ctx, int i) {
  WH_RETURN_IF_ERROR(NeedTensor(ctx, i));
  if (!ctx.HasInput(i)) return Status::Ok();
  const DType dt = ctx.InputDType(i);
  if (dt != DType::kInt32 && dt != DType::kInt64 && dt != DType::kUndefined)
    return ctx.Error("position must be int32 or int64, got " + std::string(DTypeName(dt)));
  if (const SymShape* s = ctx.InputShape(i); s && !(s->empty() || (s->size() == 1 && (*s)[0] == Dim(1))))
    return ctx.Error("position must be a scalar, got shape " + SymShapeToString(*s));
  return Status::Ok();
}

void SequenceOut(InferContext& ctx, int k, DType elem) {
  ctx.SetOutput(k, elem, std::nullopt);
  ctx.SetOutputKind(k, ValueKind::kSequence);
}

Status CheckElementDType(const InferContext& ctx, DType seq, DType t) {
  if (seq != DType::kUndefined && t != DType::kUndefined && seq != t)
    return ctx.Error("the tensor is " + std::string(DTypeName(t)) + ", the sequence holds " + DTypeName(seq));
  return Status::Ok();
}

Status InferSequenceEmpty(InferContext& ctx) {
  const int64_t dt = ctx.attrs().GetInt("dtype", static_cast<int64_t>(DType::kFloat32));
  if (dt <= 0 || DTypeBits(static_cast<DType>(dt)) == 0)
    return ctx.Error("attribute 'dtype' " + std::to_string(dt) + " is not a supported tensor type");
  SequenceOut(ctx, 0, static_cast<DType>(dt));
  return Status::Ok();
}

Status InferSequenceConstruct(InferContext& ctx) {
  DType dt = DType::kUndefined;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    WH_RETURN_IF_ERROR(NeedTensor(ctx, i));
    if (!ctx.HasInput(i)) return ctx.Error("input " + std::to_string(i) + " is missing");
    WH_RETURN_IF_ERROR(CheckElementDType(ctx, dt, ctx.InputDType(i)));
    if (dt == DType::kUndefined) dt = ctx.InputDType(i);
  }
  SequenceOut(ctx, 0, dt);
  return Status::Ok();
}

Status InferSequenceInsert(InferContext& ctx) {
  WH_RETURN_IF_ERROR(NeedSequence(ctx, 0));
  WH_RETURN_IF_ERROR(NeedTensor(ctx, 1));
  WH_RETURN_IF_ERROR(NeedPosition(ctx, 2));
  WH_RETURN_IF_ERROR(CheckElementDType(ctx, ctx.InputDType(0), ctx.InputDType(1)));
  SequenceOut(ctx, 0, ctx.InputDType(0) != DType::kUndefined ? ctx.InputDType(0) : ctx.InputDType(1));
  return Status::Ok();
}

Status InferSequenceAt(InferContext& ctx) {
  WH_RETURN_IF_ERROR(NeedSequence(ctx, 0));
  WH_RETURN_IF_ERROR(NeedPosition(ctx, 1));
  ctx.SetOutput(0, ctx.InputDType(0), std::nullopt);
  return Status::Ok();
}

Status InferSequenceErase(InferContext& ctx) {
  WH_RETURN_IF_ERROR(NeedSequence(ctx, 0));
  WH_RETURN_IF_ERROR(NeedPosition(ctx, 1));
  SequenceOut(ctx, 0, ctx.InputDType(0));
  return Status::Ok();
}

Status InferSequenceLength(InferContext& ctx) {
  WH_RETURN_IF_ERROR(NeedSequence(ctx, 0));
  ctx.SetOutput(0, DType::kInt64, SymShape{});
  return Status::Ok();
}

Status InferConcatFromSequence(InferContext& ctx) {
  WH_RETURN_IF_ERROR(NeedSequence(ctx, 0));
  const int64_t new_axis = ctx.attrs().GetInt("new_axis", 0);
  if (new_axis != 0 && new_axis != 1) return ctx.Error("new_axis must be 0 or 1, got " + std::to_string(new_axis));
  ctx.SetOutput(0, ctx.InputDType(0), std::nullopt);
  return Status::Ok();
}

Status InferSplitToSequence(InferContext& ctx) {
  WH_RETURN_IF_ERROR(NeedTensor(ctx, 0));
  WH_RETURN_IF_ERROR(NeedTensor(ctx, 1));
  if (ctx.HasInput(1) && ctx.InputDType(1) != DType::kInt32 && ctx.InputDType(1) != DType::kInt64 &&
      ctx.InputDType(1) != DType::kUndefined)
    return ctx.Error("split must be int32 or int64, got " + std::string(DTypeName(ctx.InputDType(1))));
  if (const SymShape* s = ctx.InputShape(1); s && s->size() > 1)
    return ctx.Error("split must be a scalar or 1-D, got shape " + SymShapeToString(*s));
  if (const SymShape* x = ctx.InputShape(0)) {
    const auto r = static_cast<int64_t>(x->size());
    const int64_t axis = ctx.attrs().GetInt("axis", 0);
    if (axis < -r || axis >= r)
      return ctx.Error("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(r));
  }
  SequenceOut(ctx, 0, ctx.InputDType(0));
  return Status::Ok();
}

// Optional: of its input (a tensor or a sequence), or, with no input, an empty optional of the
// `type` attribute.
Status InferOptional(InferContext& ctx) {
  const Attribute* type = ctx.attrs().Find("type");
  if (ctx.HasInput(0)) {
    if (IsOptional(ctx.InputKind(0))) return ctx.Error("the input is already an optional");
    const bool seq = IsSequence(ctx.InputKind(0));
    if (type && (type->type_kind == ValueKind::kSequence) != seq)
      return ctx.Error("attribute 'type' does not match the input's kind");
    ctx.SetOutput(0, ctx.InputDType(0), std::nullopt);
    ctx.SetOutputKind(0, seq ? ValueKind::kOptionalSequence : ValueKind::kOptionalTensor);
    return Status::Ok();
  }
  if (!type) return ctx.Error("with no input, attribute 'type' is required");
  ctx.SetOutput(0, type->type_dtype, std::nullopt);
  ctx.SetOutputKind(0, type->type_kind == ValueKind::kSequence ? ValueKind::kOptionalSequence
                                                               : ValueKind::kOptionalTensor);
  return Status::Ok();
}

Status InferOptionalHasElement(InferContext& ctx) {
  if (ctx.HasInput(0) && !IsOptional(ctx.InputKind(0)) && ctx.opset() < 18)
    return ctx.Error("the input must be an optional before opset 18, got a " +
                     std::string(ValueKindName(ctx.InputKind(0))));
  if (!ctx.HasInput(0) && ctx.opset() < 18) return ctx.Error("the input is required before opset 18");
  ctx.SetOutput(0, DType::kBool, SymShape{});
  return Status::Ok();
}

Status InferOptionalGetElement(InferContext& ctx) {
  const ValueKind k = ctx.InputKind(0);
  if (!IsOptional(k) && ctx.opset() < 18)
    return ctx.Error("the input must be an optional before opset 18, got a " + std::string(ValueKindName(k)));
  const bool seq = k == ValueKind::kSequence || k == ValueKind::kOptionalSequence;
  ctx.SetOutput(0, ctx.InputDType(0), seq ? std::nullopt : (ctx.InputShape(0) ? std::optional<SymShape>(*ctx.InputShape(0)) : std::nullopt));
  ctx.SetOutputKind(0, seq ? ValueKind::kSequence : ValueKind::kTensor);
  return Status::Ok();
}

}  // namespace

void RegisterSequenceOps(OpRegistry& r) {
  constexpr int kMany = 1 << 20;
  // The newest opsets whose semantics these were written for (lib/ops/schema_compat.h takes newer
  // ones where the schema only widened).
  auto add = [&](OpDef d, int max_opset) {
    d.any_kind = true;
    d.max_opset = max_opset;
    r.Register(std::move(d));
  };
  add(OpDef{"", "SequenceEmpty", 11, 0, 0, 1, 1, {{"dtype", AttrType::kInt}}, nullptr, InferSequenceEmpty}, 11);
  add(OpDef{"", "SequenceConstruct", 11, 1, kMany, 1, 1, {}, nullptr, InferSequenceConstruct}, 11);
  add(OpDef{"", "SequenceInsert", 11, 2, 3, 1, 1, {}, nullptr, InferSequenceInsert}, 11);
  add(OpDef{"", "SequenceAt", 11, 2, 2, 1, 1, {}, nullptr, InferSequenceAt}, 11);
  add(OpDef{"", "SequenceErase", 11, 1, 2, 1, 1, {}, nullptr, InferSequenceErase}, 11);
  add(OpDef{"", "SequenceLength", 11, 1, 1, 1, 1, {}, nullptr, InferSequenceLength}, 11);
  add(OpDef{"", "ConcatFromSequence", 11, 1, 1, 1, 1,
            {{"axis", AttrType::kInt, true}, {"new_axis", AttrType::kInt}}, nullptr, InferConcatFromSequence},
      11);
  add(OpDef{"", "SplitToSequence", 11, 1, 2, 1, 1, {{"axis", AttrType::kInt}, {"keepdims", AttrType::kInt}},
            nullptr, InferSplitToSequence},
      11);
  add(OpDef{"", "Optional", 15, 0, 1, 1, 1, {{"type", AttrType::kType}}, nullptr, InferOptional}, 15);
  add(OpDef{"", "OptionalHasElement", 15, 0, 1, 1, 1, {}, nullptr, InferOptionalHasElement}, 18);
  add(OpDef{"", "OptionalGetElement", 15, 1, 1, 1, 1, {}, nullptr, InferOptionalGetElement}, 18);
}

}  // namespace whittle
