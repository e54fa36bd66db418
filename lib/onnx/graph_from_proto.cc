// ModelProto -> Graph (see proto_convert.h). Builds values for initializers, graph inputs and node
// outputs, resolves every name, and rejects what would make the IR inconsistent: duplicate
// names, two producers of one value, dangling references, undeclared domains, cycles.
#include <climits>
#include <set>
#include <unordered_map>

#include "lib/ir/memory_meter.h"
#include "lib/onnx/proto_convert.h"

namespace whittle::onnx_io {
namespace {

std::string NormalizeDomain(const std::string& d) { return d == "ai.onnx" ? std::string() : d; }

std::string DomainLabel(const std::string& d) { return d.empty() ? "ai.onnx" : d; }

// Reads a value's declared type. Values without a type keep kUndefined and no shape. Exporters
// write a dynamic dimension as a dim_param, as nothing, or as a negative dim_value (Paddle2ONNX
// writes -1): all three become an unknown Dim. With zero_is_dynamic (graph inputs), dim_value 0
// is read as dynamic too, as some exporters write it; a real empty input is still accepted at
// run time, where every shape is concrete.
Status ReadValueType(const onnx::TypeProto& type, bool has_type, const std::string& what, DType* dtype,
                     std::optional<SymShape>* shape, bool zero_is_dynamic = false) {
  *dtype = DType::kUndefined;
  shape->reset();
  if (!has_type) return Status::Ok();
  switch (type.value_case()) {
    case onnx::TypeProto::kTensorType: break;
    case onnx::TypeProto::VALUE_NOT_SET: return Status::Ok();
    case onnx::TypeProto::kSequenceType: return Unimplemented(what + " is a sequence; only tensors are supported");
    case onnx::TypeProto::kMapType: return Unimplemented(what + " is a map; only tensors are supported");
    case onnx::TypeProto::kOptionalType: return Unimplemented(what + " is an optional; only tensors are supported");
    case onnx::TypeProto::kSparseTensorType:
      return Unimplemented(what + " is a sparse tensor; only dense tensors are supported");
    default: return Unimplemented(what + " has an unsupported type kind");
  }
  const onnx::TypeProto::Tensor& tt = type.tensor_type();
  if (tt.elem_type() != onnx::TensorProto::UNDEFINED) {
    WH_ASSIGN_OR_RETURN(*dtype, DTypeFromOnnx(tt.elem_type(), what));
  }
  if (!tt.has_shape()) return Status::Ok();
  SymShape s;
  s.reserve(static_cast<size_t>(tt.shape().dim_size()));
  for (const auto& d : tt.shape().dim()) {
    if (d.has_dim_value() && d.dim_value() > 0) {
      s.push_back(Dim(d.dim_value()));
    } else if (d.has_dim_value() && d.dim_value() == 0 && !zero_is_dynamic) {
      s.push_back(Dim(0));
    } else if (d.has_dim_param() && !d.dim_param().empty()) {
      s.push_back(Dim::Symbol(d.dim_param()));
    } else {
      s.push_back(Dim());
    }
  }
  *shape = std::move(s);
  return Status::Ok();
}

Status ReadValueInfo(const onnx::ValueInfoProto& vi, const std::string& what, DType* dtype,
                     std::optional<SymShape>* shape, bool zero_is_dynamic = false) {
  return ReadValueType(vi.type(), vi.has_type(), what, dtype, shape, zero_is_dynamic);
}

// Where a value name comes from, for duplicate-name messages.
std::string Origin(const Graph& g, int id, const std::vector<std::string>& node_names) {
  const Value& v = g.value(id);
  if (v.is_constant()) return "an initializer";
  if (v.producer >= 0) return "node '" + node_names[static_cast<size_t>(v.producer)] + "'";
  return "a graph input";
}

}  // namespace

StatusOr<Graph> GraphFromModelProto(const onnx::ModelProto& m, const std::string& base_dir) {
  if (m.ir_version() <= 0)
    return InvalidArgument("not an ONNX model: ir_version is missing (the file may be truncated or not ONNX)");
  if (!m.has_graph()) return InvalidArgument("not an ONNX model: it has no graph");
  const onnx::GraphProto& gp = m.graph();
  if (gp.sparse_initializer_size() > 0) return Unimplemented("sparse initializers are not supported");

  Graph g;
  g.ir_version = m.ir_version();
  g.producer_name = m.producer_name();
  g.producer_version = m.producer_version();
  g.model_version = m.model_version();
  g.name = gp.name();
  g.doc_string = gp.doc_string().empty() ? m.doc_string() : gp.doc_string();
  for (const auto& kv : m.metadata_props()) {
    if (g.metadata.count(kv.key())) return InvalidArgument("metadata key '" + kv.key() + "' appears twice");
    g.metadata[kv.key()] = kv.value();
  }
  for (const auto& op : m.opset_import()) {
    const std::string d = NormalizeDomain(op.domain());
    if (op.version() <= 0 || op.version() > INT32_MAX)
      return InvalidArgument("opset import for domain '" + DomainLabel(d) + "' has version " +
                             std::to_string(op.version()) + "; expected a positive 32-bit version");
    if (g.opset_imports.count(d)) return InvalidArgument("domain '" + DomainLabel(d) + "' is imported twice");
    g.opset_imports[d] = op.version();
  }
  // IR version < 3 predates opset_import: such models implicitly use ai.onnx opset 1.
  if (m.opset_import_size() == 0 && m.ir_version() < 3) g.opset_imports[""] = 1;

  // Initializers first: graph inputs with the same name are defaults, i.e. constants. Together
  // they are held to the process's memory budget (each one alone: TensorFromProto).
  const int64_t budget = ProcessMemoryBudget();
  uint64_t weight_bytes = 0;
  for (int i = 0; i < gp.initializer_size(); ++i) {
    const onnx::TensorProto& tp = gp.initializer(i);
    if (tp.name().empty()) return InvalidArgument("initializer #" + std::to_string(i) + " has no name");
    const std::string what = "initializer '" + tp.name() + "'";
    if (g.FindValue(tp.name()) >= 0) return InvalidArgument(what + " is defined twice");
    WH_ASSIGN_OR_RETURN(Tensor t, TensorFromProto(tp, base_dir, what));
    weight_bytes += t.nbytes();
    if (budget > 0 && weight_bytes > static_cast<uint64_t>(budget))
      return ResourceExhausted("the initializers up to " + what + " need " + HumanBytes(weight_bytes) +
                               ", over the memory budget of " + HumanBytes(static_cast<uint64_t>(budget)) +
                               " (--max-memory)");
    g.AddInitializer(tp.name(), std::move(t));
  }
  std::set<std::string> input_names;
  for (const auto& in : gp.input()) {
    const std::string what = "graph input '" + in.name() + "'";
    if (in.name().empty()) return InvalidArgument("a graph input has no name");
    if (!input_names.insert(in.name()).second) return InvalidArgument(what + " is listed twice");
    DType dt;
    std::optional<SymShape> shape;
    const int existing = g.FindValue(in.name());
    if (existing >= 0) {
      // An input with a default value: the initializer's dtype must agree with the declaration.
      if (in.type().has_tensor_type() && in.type().tensor_type().elem_type() != 0 &&
          in.type().tensor_type().elem_type() != static_cast<int32_t>(g.value(existing).dtype))
        return InvalidArgument(what + " is declared with data type " +
                               std::to_string(in.type().tensor_type().elem_type()) + " but its initializer is " +
                               DTypeName(g.value(existing).dtype));
      continue;
    }
    WH_RETURN_IF_ERROR(ReadValueInfo(in, what, &dt, &shape, /*zero_is_dynamic=*/true));
    g.inputs().push_back(g.AddValue(in.name(), dt, std::move(shape)));
  }

  // Node names (generated when empty) and output values.
  std::vector<std::string> node_names;
  node_names.reserve(static_cast<size_t>(gp.node_size()));
  std::set<std::string> used_names;
  for (const auto& np : gp.node()) used_names.insert(np.name());
  for (int ni = 0; ni < gp.node_size(); ++ni) {
    const onnx::NodeProto& np = gp.node(ni);
    std::string name = np.name();
    if (name.empty()) {
      name = np.op_type() + "_" + std::to_string(ni);
      for (int k = 1; used_names.count(name); ++k) name = np.op_type() + "_" + std::to_string(ni) + "_" + std::to_string(k);
      used_names.insert(name);
    }
    node_names.push_back(name);
  }
  std::vector<std::vector<int>> node_outputs(static_cast<size_t>(gp.node_size()));
  for (int ni = 0; ni < gp.node_size(); ++ni) {
    const onnx::NodeProto& np = gp.node(ni);
    const std::string where = "node '" + node_names[static_cast<size_t>(ni)] + "' (" + np.op_type() + ")";
    if (np.op_type().empty()) return InvalidArgument("node '" + node_names[static_cast<size_t>(ni)] + "' has no op_type");
    for (const std::string& out : np.output()) {
      if (out.empty()) {
        node_outputs[static_cast<size_t>(ni)].push_back(-1);
        continue;
      }
      const int existing = g.FindValue(out);
      if (existing >= 0) {
        const int p = g.value(existing).producer;
        const std::string origin = p == ni ? "this node already" : Origin(g, existing, node_names);
        return InvalidArgument(where + " outputs '" + out + "', which " + origin +
                               (p == ni ? " outputs" : " also defines") + "; every value must have one producer");
      }
      const int id = g.AddValue(out);
      g.value(id).producer = ni;  // provisional, for messages; AddNode sets it again
      node_outputs[static_cast<size_t>(ni)].push_back(id);
    }
  }

  for (int ni = 0; ni < gp.node_size(); ++ni) {
    const onnx::NodeProto& np = gp.node(ni);
    Node n;
    n.name = node_names[static_cast<size_t>(ni)];
    n.op_type = np.op_type();
    n.domain = NormalizeDomain(np.domain());
    const std::string where = n.DebugName();
    if (!g.opset_imports.count(n.domain))
      return InvalidArgument(where + " uses domain '" + DomainLabel(n.domain) +
                             "', which the model does not import (add it to opset_import)");
    for (int k = 0; k < np.input_size(); ++k) {
      const std::string& in = np.input(k);
      if (in.empty()) {
        n.inputs.push_back(-1);
        continue;
      }
      const int id = g.FindValue(in);
      if (id < 0)
        return InvalidArgument(where + ": input " + std::to_string(k) + " '" + in +
                               "' is not produced by any node and is neither a graph input nor an initializer");
      n.inputs.push_back(id);
    }
    n.outputs = node_outputs[static_cast<size_t>(ni)];
    std::set<std::string> attr_names;
    for (const auto& ap : np.attribute()) {
      if (!attr_names.insert(ap.name()).second)
        return InvalidArgument(where + ": attribute '" + ap.name() + "' appears twice");
      WH_ASSIGN_OR_RETURN(Attribute a, AttributeFromProto(ap, base_dir, where));
      n.attrs.Set(ap.name(), std::move(a));
    }
    g.AddNode(std::move(n));
  }

  for (const auto& out : gp.output()) {
    const std::string what = "graph output '" + out.name() + "'";
    if (out.name().empty()) return InvalidArgument("a graph output has no name");
    const int id = g.FindValue(out.name());
    if (id < 0)
      return InvalidArgument(what + " is not produced by any node and is neither a graph input nor an initializer");
    DType dt;
    std::optional<SymShape> shape;
    WH_RETURN_IF_ERROR(ReadValueInfo(out, what, &dt, &shape));
    Value& v = g.value(id);
    if (!v.is_constant()) {
      if (v.dtype == DType::kUndefined) v.dtype = dt;
      if (!v.shape) v.shape = std::move(shape);
    }
    g.outputs().push_back(id);
  }
  for (const auto& vi : gp.value_info()) {
    const int id = g.FindValue(vi.name());
    if (id < 0) continue;  // annotations of values that no longer exist are harmless
    Value& v = g.value(id);
    if (v.is_constant()) continue;
    DType dt;
    std::optional<SymShape> shape;
    WH_RETURN_IF_ERROR(ReadValueInfo(vi, "value '" + vi.name() + "'", &dt, &shape));
    if (v.dtype == DType::kUndefined) v.dtype = dt;
    if (!v.shape) v.shape = std::move(shape);
  }
  WH_RETURN_IF_ERROR(g.Verify());
  return g;
}

}  // namespace whittle::onnx_io
