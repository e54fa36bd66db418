// ModelProto -> Graph (see proto_convert.h). Builds values for initializers, graph inputs and node
// outputs, resolves every name, and rejects what would make the IR inconsistent: duplicate
// names, two producers of one value, dangling references, undeclared domains, cycles.
#include <algorithm>
#include <climits>
#include <map>
#include <memory>
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
                     std::optional<SymShape>* shape, bool zero_is_dynamic = false, ValueKind* kind = nullptr) {
  *dtype = DType::kUndefined;
  shape->reset();
  if (kind) *kind = ValueKind::kTensor;
  if (!has_type) return Status::Ok();
  // A sequence of tensors, or an optional of a tensor or of such a sequence: the element's type
  // (its shape is not kept: elements may differ in shape).
  auto element = [&](const onnx::TypeProto& e, bool in_optional) -> Status {
    if (e.value_case() == onnx::TypeProto::kSequenceType && in_optional) {
      if (kind) *kind = ValueKind::kOptionalSequence;
      const onnx::TypeProto& inner = e.sequence_type().elem_type();
      if (inner.value_case() != onnx::TypeProto::kTensorType)
        return Unimplemented(what + " is an optional sequence of non-tensors; only sequences of tensors are supported");
      if (inner.tensor_type().elem_type() != onnx::TensorProto::UNDEFINED) {
        WH_ASSIGN_OR_RETURN(*dtype, DTypeFromOnnx(inner.tensor_type().elem_type(), what));
      }
      return Status::Ok();
    }
    if (e.value_case() == onnx::TypeProto::VALUE_NOT_SET) return Status::Ok();
    if (e.value_case() != onnx::TypeProto::kTensorType)
      return Unimplemented(what + (in_optional ? " is an optional of a non-tensor" : " is a sequence of non-tensors") +
                           "; only tensors and sequences of tensors are supported");
    if (e.tensor_type().elem_type() != onnx::TensorProto::UNDEFINED) {
      WH_ASSIGN_OR_RETURN(*dtype, DTypeFromOnnx(e.tensor_type().elem_type(), what));
    }
    return Status::Ok();
  };
  switch (type.value_case()) {
    case onnx::TypeProto::kTensorType: break;
    case onnx::TypeProto::VALUE_NOT_SET: return Status::Ok();
    case onnx::TypeProto::kSequenceType:
      if (!kind) return Unimplemented(what + " is a sequence; only tensors are supported here");
      *kind = ValueKind::kSequence;
      return element(type.sequence_type().elem_type(), false);
    case onnx::TypeProto::kOptionalType:
      if (!kind) return Unimplemented(what + " is an optional; only tensors are supported here");
      *kind = ValueKind::kOptionalTensor;
      return element(type.optional_type().elem_type(), true);
    case onnx::TypeProto::kMapType: return Unimplemented(what + " is a map; only tensors, sequences and optionals are supported");
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
                     std::optional<SymShape>* shape, bool zero_is_dynamic = false, ValueKind* kind = nullptr) {
  return ReadValueType(vi.type(), vi.has_type(), what, dtype, shape, zero_is_dynamic, kind);
}

// Where a value name comes from, for duplicate-name messages.
std::string Origin(const Graph& g, int id, const std::vector<std::string>& node_names) {
  const Value& v = g.value(id);
  if (v.is_constant()) return "an initializer";
  if (v.producer >= 0) return "node '" + node_names[static_cast<size_t>(v.producer)] + "'";
  return "a graph input";
}

// A graph being built and the scope it sits in: names it does not define resolve in its parent
// (recursively), and each one so read becomes a value of this graph, listed in `captured` (name,
// id) in the order first read; the node that holds the graph passes them in (Node::implicit_inputs).
struct Scope {
  Graph* g;
  Scope* parent;
  std::vector<std::pair<std::string, int>> captured;
};

int Resolve(Scope& s, const std::string& name) {
  const int id = s.g->FindValue(name);
  if (id >= 0 || !s.parent) return id;
  const int outer = Resolve(*s.parent, name);
  if (outer < 0) return -1;
  const Value& ov = s.parent->g->value(outer);
  const int cid = s.g->AddValue(name, ov.dtype, ov.shape);
  s.g->value(cid).kind = ov.kind;
  s.captured.emplace_back(name, cid);
  return cid;
}

// Builds a GraphProto (the model's or a subgraph) into scope.g; weights of every level are held
// to one memory budget together.
class Builder {
 public:
  Builder(const std::string& base_dir, std::map<std::string, int64_t> opsets, int64_t ir_version)
      : base_dir_(base_dir), opsets_(std::move(opsets)), ir_version_(ir_version), budget_(ProcessMemoryBudget()) {}
  Status Build(const onnx::GraphProto& gp, Scope& scope);

 private:
  const std::string& base_dir_;
  std::map<std::string, int64_t> opsets_;
  int64_t ir_version_;
  int64_t budget_;
  uint64_t weight_bytes_ = 0;
};

Status Builder::Build(const onnx::GraphProto& gp, Scope& scope) {
  Graph& g = *scope.g;
  if (gp.sparse_initializer_size() > 0) return Unimplemented("sparse initializers are not supported");
  // Initializers first: graph inputs with the same name are defaults, i.e. constants. Together
  // they are held to the process's memory budget (each one alone: TensorFromProto).
  for (int i = 0; i < gp.initializer_size(); ++i) {
    const onnx::TensorProto& tp = gp.initializer(i);
    if (tp.name().empty()) return InvalidArgument("initializer #" + std::to_string(i) + " has no name");
    const std::string what = "initializer '" + tp.name() + "'";
    if (g.FindValue(tp.name()) >= 0) return InvalidArgument(what + " is defined twice");
    WH_ASSIGN_OR_RETURN(Tensor t, TensorFromProto(tp, base_dir_, what));
    weight_bytes_ += t.nbytes();
    if (budget_ > 0 && weight_bytes_ > static_cast<uint64_t>(budget_))
      return ResourceExhausted("the initializers up to " + what + " need " + HumanBytes(weight_bytes_) +
                               ", over the memory budget of " + HumanBytes(static_cast<uint64_t>(budget_)) +
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
    ValueKind kind;
    WH_RETURN_IF_ERROR(ReadValueInfo(in, what, &dt, &shape, /*zero_is_dynamic=*/true, &kind));
    g.inputs().push_back(g.AddValue(in.name(), dt, std::move(shape)));
    g.value(g.inputs().back()).kind = kind;
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
      const int id = Resolve(scope, in);
      if (id < 0)
        return InvalidArgument(where + ": input " + std::to_string(k) + " '" + in +
                               "' is not produced by any node and is neither a graph input nor an initializer" +
                               (scope.parent ? " of this graph or an enclosing one" : ""));
      n.inputs.push_back(id);
    }
    n.outputs = node_outputs[static_cast<size_t>(ni)];
    std::set<std::string> attr_names;
    std::vector<std::pair<std::string, std::unique_ptr<Scope>>> subs;  // graph attributes, as built
    std::vector<std::unique_ptr<Graph>> sub_graphs;
    for (const auto& ap : np.attribute()) {
      if (!attr_names.insert(ap.name()).second)
        return InvalidArgument(where + ": attribute '" + ap.name() + "' appears twice");
      if (ap.type() == onnx::AttributeProto::GRAPH && ap.has_g() && ap.ref_attr_name().empty()) {
        sub_graphs.push_back(std::make_unique<Graph>());
        Graph& sg = *sub_graphs.back();
        sg.opset_imports = opsets_;
        sg.ir_version = ir_version_;
        sg.name = ap.g().name();
        auto child = std::make_unique<Scope>(Scope{&sg, &scope, {}});
        WH_RETURN_IF_ERROR(Build(ap.g(), *child).WithContext(where + ": attribute '" + ap.name() + "'"));
        subs.emplace_back(ap.name(), std::move(child));
        continue;
      }
      WH_ASSIGN_OR_RETURN(Attribute a, AttributeFromProto(ap, base_dir_, where));
      n.attrs.Set(ap.name(), std::move(a));
    }
    if (!subs.empty()) {
      // The outer values any subgraph reads become the node's implicit inputs, bound in the same
      // order to every subgraph's trailing inputs (a branch that does not read one gets an unused
      // input in its place).
      std::vector<std::string> outer;
      for (const auto& [name, sc] : subs)
        for (const auto& [cname, cid] : sc->captured)
          if (std::find(outer.begin(), outer.end(), cname) == outer.end()) outer.push_back(cname);
      for (const std::string& name : outer) n.inputs.push_back(g.FindValue(name));
      n.implicit_inputs = static_cast<int>(outer.size());
      for (auto& [name, sc] : subs) {
        Graph& sg = *sc->g;
        for (const std::string& oname : outer) {
          int id = -1;
          for (const auto& [cname, cid] : sc->captured)
            if (cname == oname) id = cid;
          if (id < 0) {
            const Value& ov = g.value(g.FindValue(oname));
            id = sg.AddValue(sg.UniqueName(oname), ov.dtype, ov.shape);
          }
          sg.inputs().push_back(id);
        }
        sg.outer_inputs = n.implicit_inputs;
        WH_RETURN_IF_ERROR(sg.Verify().WithContext(where + ": attribute '" + name + "'"));
        n.attrs.Set(name, Attribute::GraphValue(std::move(sg)));
      }
    }
    g.AddNode(std::move(n));
  }

  for (const auto& out : gp.output()) {
    const std::string what = "graph output '" + out.name() + "'";
    if (out.name().empty()) return InvalidArgument("a graph output has no name");
    const int id = Resolve(scope, out.name());
    if (id < 0)
      return InvalidArgument(what + " is not produced by any node and is neither a graph input nor an initializer");
    DType dt;
    std::optional<SymShape> shape;
    ValueKind kind;
    WH_RETURN_IF_ERROR(ReadValueInfo(out, what, &dt, &shape, false, &kind));
    Value& v = g.value(id);
    if (kind != ValueKind::kTensor && v.producer >= 0) v.kind = kind;  // inference checks it
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
    ValueKind kind;
    WH_RETURN_IF_ERROR(ReadValueInfo(vi, "value '" + vi.name() + "'", &dt, &shape, false, &kind));
    if (kind != ValueKind::kTensor && v.producer >= 0) v.kind = kind;
    if (v.dtype == DType::kUndefined) v.dtype = dt;
    if (!v.shape) v.shape = std::move(shape);
  }
  if (!scope.parent) WH_RETURN_IF_ERROR(g.Verify());
  return Status::Ok();
}


}  // namespace

StatusOr<Graph> GraphFromModelProto(const onnx::ModelProto& m, const std::string& base_dir) {
  if (m.ir_version() <= 0)
    return InvalidArgument("not an ONNX model: ir_version is missing (the file may be truncated or not ONNX)");
  if (!m.has_graph()) return InvalidArgument("not an ONNX model: it has no graph");
  const onnx::GraphProto& gp = m.graph();

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

  Builder b(base_dir, g.opset_imports, g.ir_version);
  Scope scope{&g, nullptr, {}};
  WH_RETURN_IF_ERROR(b.Build(gp, scope));
  return g;
}

}  // namespace whittle::onnx_io
