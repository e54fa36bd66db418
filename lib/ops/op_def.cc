#include "lib/ops/op_def.h"

#include <mutex>
#include <unordered_map>

#include "lib/ops/schema_compat.h"
#include "lib/ops/shape_values.h"

namespace whittle {

OpRegistry& OpRegistry::Global() {
  static OpRegistry r;
  return r;
}

void OpRegistry::Register(OpDef def) {
  WH_CHECK(Find(def.domain, def.op_type) == nullptr);
  defs_.push_back(std::make_unique<OpDef>(std::move(def)));
}

const OpDef* OpRegistry::Find(const std::string& domain, const std::string& op_type) const {
  const std::string d = domain == "ai.onnx" ? "" : domain;
  for (const auto& p : defs_)
    if (p->domain == d && p->op_type == op_type) return p.get();
  return nullptr;
}

std::vector<const OpDef*> OpRegistry::All() const {
  std::vector<const OpDef*> r;
  for (const auto& p : defs_) r.push_back(p.get());
  return r;
}

Status ValidateNode(const Node& node, int opset) {
  RegisterAllOps();  // library users need not remember to
  const OpDef* def = OpRegistry::Global().Find(node.domain, node.op_type);
  if (!def) {
    return Unimplemented(node.DebugName() + ": unsupported op '" + node.op_type + "'" +
                         (node.domain.empty() ? "" : " in domain '" + node.domain + "'"));
  }
  if (opset < def->since_opset)
    return Unimplemented(node.DebugName() + ": opset " + std::to_string(opset) + " is older than the " +
                         std::to_string(def->since_opset) + " this op supports");
  if (node.domain.empty() && opset > def->max_opset) {
    std::string why;
    if (!OpUnchangedBetween(node.op_type, def->max_opset, opset, &why))
      return Unimplemented(node.DebugName() + ": opset " + std::to_string(opset) + " changed this op (" + why +
                           "); Whittle implements it up to opset " + std::to_string(def->max_opset));
  }
  // Trailing absent inputs do not count.
  int n_in = static_cast<int>(node.explicit_inputs());  // implicit inputs: outer values subgraphs read
  if (node.implicit_inputs > 0 && node.attrs.Subgraphs().empty())
    return InvalidArgument(node.DebugName() + ": has implicit inputs but no subgraph");
  while (n_in > 0 && node.inputs[static_cast<size_t>(n_in - 1)] < 0) --n_in;
  if (n_in < def->min_inputs || n_in > def->max_inputs)
    return InvalidArgument(node.DebugName() + ": has " + std::to_string(n_in) + " inputs, expected " +
                           std::to_string(def->min_inputs) + ".." + std::to_string(def->max_inputs));
  for (int i = 0; i < def->min_inputs; ++i)
    if (node.inputs[static_cast<size_t>(i)] < 0)
      return InvalidArgument(node.DebugName() + ": required input " + std::to_string(i) + " is missing");
  int n_out = static_cast<int>(node.outputs.size());
  if (n_out < def->min_outputs || n_out > def->max_outputs)
    return InvalidArgument(node.DebugName() + ": has " + std::to_string(n_out) + " outputs, expected " +
                           std::to_string(def->min_outputs) + ".." + std::to_string(def->max_outputs));
  for (const auto& [name, attr] : node.attrs.all()) {
    if (!name.empty() && name[0] == '_') continue;  // runtime-internal (fusions)
    const AttrSpec* spec = nullptr;
    for (const auto& s : def->attrs)
      if (s.name == name) spec = &s;
    if (!spec) return InvalidArgument(node.DebugName() + ": unknown attribute '" + name + "'");
    if (spec->type != attr.type)
      return InvalidArgument(node.DebugName() + ": attribute '" + name + "' must be " + AttrTypeName(spec->type) +
                             ", got " + AttrTypeName(attr.type));
  }
  for (const auto& s : def->attrs)
    if (s.required && !node.attrs.Has(s.name))
      return InvalidArgument(node.DebugName() + ": required attribute '" + s.name + "' is missing");
  if (def->check) WH_RETURN_IF_ERROR(def->check(node, opset));
  return Status::Ok();
}

Status InferNode(const OpDef& def, InferContext& ctx) {
  if (!def.infer) return Status::Ok();
  return def.infer(ctx);
}

namespace {

// A fully known shape value of an int32/int64 value of rank <= 1 as a tensor (undefined otherwise).
Tensor MaterializeShapeValue(const Value& val, const ShapeValue& sv) {
  if (!val.shape || val.shape->size() > 1 || (val.dtype != DType::kInt64 && val.dtype != DType::kInt32)) return Tensor();
  for (const SymInt& d : sv)
    if (!d.known()) return Tensor();
  Tensor t(val.dtype, val.shape->empty() ? Dims{} : Dims{static_cast<int64_t>(sv.size())});
  for (size_t k = 0; k < sv.size(); ++k) {
    if (val.dtype == DType::kInt64) t.data<int64_t>()[k] = *sv[k].value;
    else t.data<int32_t>()[k] = static_cast<int32_t>(*sv[k].value);
  }
  return t;
}

}  // namespace

Status InferShapes(Graph& graph) {
  RegisterAllOps();
  WH_ASSIGN_OR_RETURN(std::vector<int> order, graph.TopologicalOrder());
  // Shape values propagated so far (value id -> elements), and the tensors materialized from the
  // fully known ones so that every op's inference sees them as constant inputs.
  std::unordered_map<int, ShapeValue> shape_values;
  std::unordered_map<int, Tensor> materialized;  // value id -> tensor (undefined: not fully known)
  for (int ni : order) {
    const Node& node = graph.nodes()[static_cast<size_t>(ni)];
    const OpDef* def = OpRegistry::Global().Find(node.domain, node.op_type);
    if (!def) return Unimplemented(node.DebugName() + ": unsupported op '" + node.op_type + "'");
    const int opset = static_cast<int>(graph.OpsetFor(node.domain));
    if (def->infer_subgraphs) {
      std::vector<const Value*> ins;
      for (int v : node.inputs) ins.push_back(v < 0 ? nullptr : &graph.value(v));
      WH_RETURN_IF_ERROR(def->infer_subgraphs(graph.nodes()[static_cast<size_t>(ni)], opset, ins));
    }
    InferContext ctx(node, opset);
    std::vector<const Value*> in_values;
    std::vector<const ShapeValue*> in_svals;
    for (int v : node.inputs) {
      in_values.push_back(v < 0 ? nullptr : &graph.value(v));
      auto it = v < 0 ? shape_values.end() : shape_values.find(v);
      in_svals.push_back(it == shape_values.end() ? nullptr : &it->second);
      if (v < 0) {
        ctx.AddInput(false, DType::kUndefined, std::nullopt, nullptr);
        continue;
      }
      const Value& val = graph.value(v);
      const Tensor* value = val.initializer ? &*val.initializer : nullptr;
      if (!value && in_svals.back()) {
        auto m = materialized.find(v);
        if (m == materialized.end()) m = materialized.emplace(v, MaterializeShapeValue(val, *in_svals.back())).first;
        if (m->second.defined()) value = &m->second;
      }
      if (val.kind != ValueKind::kTensor && !def->any_kind)
        return InvalidArgument(node.DebugName() + ": input '" + val.name + "' is a " + ValueKindName(val.kind) + "; " +
                               node.op_type + " takes tensors");
      ctx.AddInput(true, val.dtype, val.shape, value, val.kind);
      ctx.SetInputSymValue(static_cast<int>(in_svals.size()) - 1, in_svals.back());
    }
    for (int o : node.outputs) ctx.AddOutputSlot(o >= 0);
    WH_RETURN_IF_ERROR(InferNode(*def, ctx));
    {
      std::vector<std::optional<SymShape>> out_shapes;
      for (size_t i = 0; i < node.outputs.size(); ++i) out_shapes.push_back(ctx.OutputShape(static_cast<int>(i)));
      auto props = PropagateShapeValues(node, opset, in_values, in_svals, out_shapes);
      for (size_t i = 0; i < props.size(); ++i)
        if (props[i] && node.outputs[i] >= 0) shape_values[node.outputs[i]] = std::move(*props[i]);
    }
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      int o = node.outputs[i];
      if (o < 0) continue;
      Value& out = graph.value(o);
      DType dt = ctx.OutputDType(static_cast<int>(i));
      const auto& shp = ctx.OutputShape(static_cast<int>(i));
      const ValueKind kind = ctx.OutputKind(static_cast<int>(i));
      if (out.kind != kind) {
        // A declared kind (graph output, value_info) must be what the op makes; an optional
        // declared where the op makes its element is the element (an optional with a value).
        const bool widened = (out.kind == ValueKind::kOptionalTensor && kind == ValueKind::kTensor) ||
                             (out.kind == ValueKind::kOptionalSequence && kind == ValueKind::kSequence);
        if (!widened && out.kind != ValueKind::kTensor)
          return InvalidArgument(node.DebugName() + ": output '" + out.name + "' is declared a " +
                                 ValueKindName(out.kind) + " but the op produces a " + ValueKindName(kind));
        if (!widened) out.kind = kind;
      }
      if (kind != ValueKind::kTensor) {
        if (dt != DType::kUndefined) out.dtype = dt;
        out.shape.reset();
        continue;
      }
      if (dt != DType::kUndefined) {
        if (out.dtype != DType::kUndefined && out.dtype != dt)
          return InvalidArgument(node.DebugName() + ": output '" + out.name + "' is declared " +
                                 DTypeName(out.dtype) + " but the op produces " + DTypeName(dt));
        out.dtype = dt;
      }
      if (shp) {
        // Keep declared symbolic names where inference only knows "unknown".
        if (out.shape && out.shape->size() == shp->size()) {
          SymShape merged = *shp;
          for (size_t k = 0; k < merged.size(); ++k) {
            const Dim& declared = (*out.shape)[k];
            if (!merged[k].known() && merged[k].param.empty()) merged[k] = declared;
            else if (merged[k].known() && declared.known() && declared.value != merged[k].value)
              return InvalidArgument(node.DebugName() + ": output '" + out.name + "' is declared with shape " +
                                     SymShapeToString(*out.shape) + " but the op produces " + SymShapeToString(*shp));
          }
          out.shape = merged;
        } else {
          out.shape = shp;
        }
      }
    }
  }
  return Status::Ok();
}

}  // namespace whittle
