#include "runtime/session/input_check.h"

namespace whittle {

Status CheckInputNames(const std::map<std::string, Tensor>& inputs, const std::vector<IoInfo>& model_inputs) {
  for (const auto& [name, t] : inputs) {
    bool known = false;
    for (const IoInfo& in : model_inputs) known |= in.name == name;
    if (!known) return InvalidArgument("the model has no input named '" + name + "'");
  }
  return Status::Ok();
}

namespace {

const char* RuntimeKind(const Tensor& t) {
  return t.is_sequence() ? "a sequence" : t.is_no_value() ? "an optional without a value" : "a tensor";
}

// A fed value of a sequence or optional input, or a sequence or optional fed for a tensor input.
Status CheckKind(const Value& v, const Tensor& t) {
  const bool optional = v.kind == ValueKind::kOptionalTensor || v.kind == ValueKind::kOptionalSequence;
  const bool want_sequence = v.kind == ValueKind::kSequence || v.kind == ValueKind::kOptionalSequence;
  if (t.is_no_value() && optional) return Status::Ok();
  if (t.is_no_value() || t.is_sequence() != want_sequence)
    return InvalidArgument("input '" + v.name + "' is a " + ValueKindName(v.kind) + ", got " + RuntimeKind(t));
  const DType dt = t.is_sequence() ? t.element_dtype() : t.dtype();
  if (v.dtype != DType::kUndefined && dt != v.dtype)
    return InvalidArgument("input '" + v.name + "' holds " + DTypeName(v.dtype) + ", got " + DTypeName(dt));
  if (t.is_sequence())
    for (size_t i = 0; i < t.elements().size(); ++i)
      if (!t.elements()[i].is_tensor() || t.elements()[i].dtype() != dt)
        return InvalidArgument("input '" + v.name + "': element " + std::to_string(i) + " is not a " +
                               DTypeName(dt) + " tensor");
  return Status::Ok();
}

}  // namespace

Status BindInputs(const Graph& g, const std::map<std::string, Tensor>& inputs, std::vector<Tensor>& slots,
                  std::vector<Tensor>& moved) {
  slots.assign(g.values().size(), Tensor());
  moved.assign(g.values().size(), Tensor());
  for (size_t v = 0; v < g.values().size(); ++v)
    if (g.values()[v].initializer) slots[v] = *g.values()[v].initializer;
  for (int id : g.inputs()) {
    const Value& v = g.value(id);
    auto it = inputs.find(v.name);
    if (it == inputs.end()) {
      if (v.is_constant()) continue;
      return InvalidArgument("missing input '" + v.name + "'");
    }
    const Tensor& t = it->second;
    if (!t.defined()) return InvalidArgument("input '" + v.name + "' is empty");
    if (v.kind != ValueKind::kTensor || !t.is_tensor()) {
      // An empty sequence made without an element type (a SequenceProto holds none) takes the
      // declared one.
      const bool untyped_empty = t.is_sequence() && t.elements().empty() && t.element_dtype() == DType::kUndefined;
      const Tensor typed = untyped_empty ? Tensor::Sequence(v.dtype, {}) : t;
      WH_RETURN_IF_ERROR(CheckKind(v, typed));
      slots[static_cast<size_t>(id)] = typed;
      continue;
    }
    if (v.dtype != DType::kUndefined && t.dtype() != v.dtype)
      return InvalidArgument("input '" + v.name + "' must be " + DTypeName(v.dtype) + ", got " + DTypeName(t.dtype()));
    if (v.shape) {
      bool ok = v.shape->size() == t.dims().size();
      for (size_t k = 0; ok && k < t.dims().size(); ++k) ok = !(*v.shape)[k].known() || (*v.shape)[k].value == t.dims()[k];
      if (!ok)
        return InvalidArgument("input '" + v.name + "' must have shape " + SymShapeToString(*v.shape) + ", got " +
                               DimsToString(t.dims()));
    }
    slots[static_cast<size_t>(id)] = t;
  }
  return Status::Ok();
}

bool CallerHeld(const std::map<std::string, Tensor>& inputs, const Tensor& t) {
  if (!t.defined() || !t.buffer()->page_locked()) return false;
  for (const auto& [name, x] : inputs)
    if (x.defined() && x.buffer() == t.buffer()) return true;
  return false;
}

}  // namespace whittle
