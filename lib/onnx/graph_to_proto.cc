// Graph -> ModelProto (see proto_convert.h). Writes declared types and shapes (symbolic dims as
// dim_param) for inputs, outputs and intermediate values, initializers as raw_data, and every
// attribute except runtime-internal ones (names starting with '_').
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "lib/onnx/proto_convert.h"

namespace whittle::onnx_io {

// A tensor's identity: the bytes it points at (copies of a Graph share them), its size and type.
using TensorKey = std::tuple<const void*, size_t, int, std::vector<int64_t>>;

// Constants of subgraphs written once, in the main graph (see HoistSharedConstants).
struct Hoisted {
  std::set<std::pair<std::string, TensorKey>> skip;        // subgraph initializers not written there
  std::vector<std::pair<std::string, const Tensor*>> main;  // written as main-graph initializers
  bool in_subgraph = false;  // skip applies (the main graph writes its own initializers)
};

Status GraphToGraphProto(const Graph& g, ExternalDataPlan* plan, const Hoisted& hoisted, onnx::GraphProto* gp);

namespace {

TensorKey KeyOf(const Tensor& t) {
  return {t.raw_data(), t.nbytes(), static_cast<int>(t.dtype()), t.dims()};
}

void CollectSubgraphConstants(const Graph& g, std::map<TensorKey, std::vector<const Value*>>* uses,
                              std::map<std::string, std::set<TensorKey>>* by_name, bool is_main) {
  for (const Value& v : g.values()) {
    if (v.initializer && v.initializer->defined() && v.initializer->nbytes() > 0) {
      if (!is_main) (*uses)[KeyOf(*v.initializer)].push_back(&v);
      (*by_name)[v.name].insert(KeyOf(*v.initializer));
    } else {
      (*by_name)[v.name].insert(TensorKey{});  // a computed value of that name
    }
  }
  for (const Node& n : g.nodes())
    for (const auto& [attr, sub] : n.attrs.Subgraphs()) CollectSubgraphConstants(*sub, uses, by_name, false);
}

// The loader gives a subgraph its own copy of each constant it reads from an enclosing graph
// (lib/onnx/model_io.cc, InlineConstantCaptures), sharing the bytes. Written as they are, a weight
// both branches of an If read would be stored twice: each such constant (the same bytes under the
// same name in several subgraphs, or in a subgraph and the main graph) is written once, as a
// main-graph initializer, which every subgraph reads by name — unless another value anywhere has
// that name, which the reference would then mean instead.
Hoisted HoistSharedConstants(const Graph& g) {
  std::map<TensorKey, std::vector<const Value*>> uses;
  std::map<std::string, std::set<TensorKey>> by_name;
  CollectSubgraphConstants(g, &uses, &by_name, true);
  Hoisted h;
  for (const auto& [key, vals] : uses) {
    const std::string& name = vals[0]->name;
    bool same_name = true;
    for (const Value* v : vals) same_name &= v->name == name;
    const int in_main = g.FindValue(name);
    const bool main_has = in_main >= 0 && g.value(in_main).initializer && KeyOf(*g.value(in_main).initializer) == key;
    if (!same_name || (vals.size() < 2 && !main_has) || by_name[name].size() != 1) continue;
    if (in_main >= 0 && !main_has) continue;
    h.skip.insert({name, key});
    if (!main_has) h.main.emplace_back(name, &*vals[0]->initializer);
  }
  return h;
}


void WriteValueInfo(const Value& v, onnx::ValueInfoProto* vi) {
  vi->set_name(v.name);
  if (v.kind != ValueKind::kTensor) {  // a sequence or an optional: its element type
    onnx::TypeProto* t = vi->mutable_type();
    if (v.kind == ValueKind::kOptionalTensor || v.kind == ValueKind::kOptionalSequence)
      t = t->mutable_optional_type()->mutable_elem_type();
    if (v.kind == ValueKind::kSequence || v.kind == ValueKind::kOptionalSequence)
      t = t->mutable_sequence_type()->mutable_elem_type();
    onnx::TypeProto::Tensor* et = t->mutable_tensor_type();
    if (v.dtype != DType::kUndefined) et->set_elem_type(static_cast<int32_t>(v.dtype));
    return;
  }
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


// A subgraph as ONNX writes it: the outer values it reads (its trailing Graph::outer_inputs) are
// not inputs there but names of the enclosing graph, so each takes the name of the value its node
// passes in (renamed where a pass renamed the outer value).
Status SubgraphToProto(const Graph& outer, const Node& n, const std::string& attr, const Graph& sub,
                       ExternalDataPlan* plan, const Hoisted& hoisted, onnx::AttributeProto* ap) {
  ap->set_name(attr);
  ap->set_type(onnx::AttributeProto::GRAPH);
  const std::string where = n.DebugName() + ": attribute '" + attr + "'";
  if (sub.outer_inputs != n.implicit_inputs) return Internal(where + ": outer inputs do not match the node's");
  Graph copy = sub;
  for (int j = 0; j < sub.outer_inputs; ++j) {
    const int inner = copy.inputs()[copy.formal_inputs() + static_cast<size_t>(j)];
    const std::string& want = outer.value(n.inputs[n.explicit_inputs() + static_cast<size_t>(j)]).name;
    if (copy.value(inner).name == want) continue;
    if (const int clash = copy.FindValue(want); clash >= 0) copy.value(clash).name = copy.UniqueName(want + "_inner");
    copy.value(inner).name = want;
    copy.Reindex();
  }
  Hoisted here;  // what was hoisted is not written again; the main graph's own list is written once
  here.skip = hoisted.skip;
  here.in_subgraph = true;
  return GraphToGraphProto(copy, plan, here, ap->mutable_g()).WithContext(where);
}

}  // namespace

// One graph's inputs, initializers, outputs, nodes and value types (the model's or a subgraph).
Status GraphToGraphProto(const Graph& g, ExternalDataPlan* plan, const Hoisted& hoisted, onnx::GraphProto* gp) {
  gp->set_name(g.name.empty() ? "main" : g.name);  // the checker requires a graph name
  if (!g.doc_string.empty()) gp->set_doc_string(g.doc_string);

  std::set<int> declared;  // values already described by an input or output
  for (size_t k = 0; k < g.formal_inputs(); ++k) {  // outer values are named, not declared
    const int id = g.inputs()[k];
    const Value& v = g.value(id);
    if (v.is_constant()) continue;  // becomes an initializer below
    WriteValueInfo(v, gp->add_input());
    declared.insert(id);
  }
  for (const auto& [name, t] : hoisted.main)
    WH_RETURN_IF_ERROR(TensorToProto(*t, name, plan, gp->add_initializer()));
  for (size_t id = 0; id < g.values().size(); ++id) {
    const Value& v = g.values()[id];
    if (!v.is_constant()) continue;
    if (hoisted.in_subgraph && hoisted.skip.count({v.name, KeyOf(*v.initializer)})) {
      declared.insert(static_cast<int>(id));
      continue;
    }
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
    for (size_t k = 0; k < n.explicit_inputs(); ++k) {
      const int i = n.inputs[k];
      np->add_input(i >= 0 ? g.value(i).name : std::string());
    }
    for (int o : n.outputs) np->add_output(o >= 0 ? g.value(o).name : std::string());
    for (const auto& [name, attr] : n.attrs.all()) {
      if (!name.empty() && name[0] == '_') continue;  // runtime-internal (fusion results)
      if (attr.type == AttrType::kGraph && attr.g) {
        WH_RETURN_IF_ERROR(SubgraphToProto(g, n, name, *attr.g.get(), plan, hoisted, np->add_attribute()));
        continue;
      }
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
  return GraphToGraphProto(g, plan, HoistSharedConstants(g), m->mutable_graph());
}

}  // namespace whittle::onnx_io
