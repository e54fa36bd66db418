// Graph -> ModelProto (see proto_convert.h). Writes declared types and shapes (symbolic dims as
// dim_param) for inputs, outputs and intermediate values, initializers as raw_data, and every
// attribute except runtime-internal ones (names starting with '_').
#include <set>

#include "lib/onnx/proto_convert.h"

namespace whittle::onnx_io {
namespace {

void WriteValueInfo(const Value& v, onnx::ValueInfoProto* vi) {
  vi->set_name(v.name);
  if (v.dtype == DType::kUndefined && !v.shape) return;
  onnx::TypeProto::Tensor* tt = vi->mutable_type()->mutable_tensor_type();
  if (v.dtype != DType::kUndefined) tt->set_elem_type(static_cast<int32_t>(v.dtype));
  if (!v.shape) return;
  onnx::TensorShapeProto* sp = tt->mutable_shape();  // present even for rank 0 (a scalar)
  for (const Dim& d : *v.shape) {
    auto* dp = sp->add_dim();
    if (d.known()) dp->set_dim_value(d.value);
    else if (!d.param.empty()) dp->set_dim_param(d.param);
  }
}

}  // namespace

Status GraphToModelProto(const Graph& g, ExternalDataPlan* plan, onnx::ModelProto* m) {
  WH_RETURN_IF_ERROR(g.Verify().WithContext("refusing to save an inconsistent graph"));
  m->Clear();
  m->set_ir_version(g.ir_version > 0 ? g.ir_version : 8);
  if (!g.producer_name.empty()) m->set_producer_name(g.producer_name);
  if (!g.producer_version.empty()) m->set_producer_version(g.producer_version);
  if (g.model_version != 0) m->set_model_version(g.model_version);
  for (const auto& [domain, version] : g.opset_imports) {
    auto* op = m->add_opset_import();
    op->set_domain(domain);
    op->set_version(version);
  }
  for (const auto& [k, v] : g.metadata) {
    auto* kv = m->add_metadata_props();
    kv->set_key(k);
    kv->set_value(v);
  }
  onnx::GraphProto* gp = m->mutable_graph();
  gp->set_name(g.name.empty() ? "main" : g.name);  // the checker requires a graph name
  if (!g.doc_string.empty()) gp->set_doc_string(g.doc_string);

  std::set<int> declared;  // values already described by an input or output
  for (int id : g.inputs()) {
    const Value& v = g.value(id);
    if (v.is_constant()) continue;  // becomes an initializer below
    WriteValueInfo(v, gp->add_input());
    declared.insert(id);
  }
  for (size_t id = 0; id < g.values().size(); ++id) {
    const Value& v = g.values()[id];
    if (!v.is_constant()) continue;
    WH_RETURN_IF_ERROR(TensorToProto(*v.initializer, v.name, plan, gp->add_initializer()));
    // IR version 3 and older require every initializer to also be a graph input.
    if (g.ir_version > 0 && g.ir_version <= 3) WriteValueInfo(v, gp->add_input());
    declared.insert(static_cast<int>(id));
  }
  for (int id : g.outputs()) {
    WriteValueInfo(g.value(id), gp->add_output());
    declared.insert(id);
  }

  for (const Node& n : g.nodes()) {
    if (!g.opset_imports.count(n.domain == "ai.onnx" ? std::string() : n.domain))
      return InvalidArgument(n.DebugName() + " uses domain '" + (n.domain.empty() ? "ai.onnx" : n.domain) +
                             "', which the graph does not import (set Graph::opset_imports)");
    onnx::NodeProto* np = gp->add_node();
    np->set_name(n.name);
    np->set_op_type(n.op_type);
    if (!n.domain.empty()) np->set_domain(n.domain);
    for (int i : n.inputs) np->add_input(i >= 0 ? g.value(i).name : std::string());
    for (int o : n.outputs) np->add_output(o >= 0 ? g.value(o).name : std::string());
    for (const auto& [name, attr] : n.attrs.all()) {
      if (!name.empty() && name[0] == '_') continue;  // runtime-internal (fusion results)
      WH_RETURN_IF_ERROR(AttributeToProto(name, attr, plan, np->add_attribute()).WithContext(n.DebugName()));
    }
    for (int o : n.outputs) {
      if (o < 0 || declared.count(o)) continue;
      const Value& v = g.value(o);
      if (v.dtype != DType::kUndefined || v.shape) WriteValueInfo(v, gp->add_value_info());
      declared.insert(o);
    }
  }
  return Status::Ok();
}

}  // namespace whittle::onnx_io
