#include "lib/ir/graph.h"

#include <algorithm>

namespace whittle {

const char* AttrTypeName(AttrType t) {
  switch (t) {
    case AttrType::kFloat: return "float";
    case AttrType::kInt: return "int";
    case AttrType::kString: return "string";
    case AttrType::kTensor: return "tensor";
    case AttrType::kGraph: return "graph";
    case AttrType::kFloats: return "floats";
    case AttrType::kInts: return "ints";
    case AttrType::kStrings: return "strings";
    case AttrType::kTensors: return "tensors";
    case AttrType::kGraphs: return "graphs";
    case AttrType::kType: return "type";
    default: return "undefined";
  }
}

std::string SymShapeToString(const SymShape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) r += ",";
    if (s[i].known()) r += std::to_string(s[i].value);
    else if (!s[i].param.empty()) r += s[i].param;
    else r += "?";
  }
  return r + "]";
}

SymShape ToSymShape(const Dims& d) { return SymShape(d.begin(), d.end()); }

std::optional<Dims> ToDims(const SymShape& s) {
  Dims d;
  d.reserve(s.size());
  for (const Dim& x : s) {
    if (!x.known()) return std::nullopt;
    d.push_back(x.value);
  }
  return d;
}

GraphBox::GraphBox() = default;
GraphBox::GraphBox(Graph g) : g_(std::make_unique<Graph>(std::move(g))) {}
GraphBox::GraphBox(const GraphBox& o) : g_(o.g_ ? std::make_unique<Graph>(*o.g_) : nullptr) {}
GraphBox::GraphBox(GraphBox&& o) noexcept = default;
GraphBox& GraphBox::operator=(const GraphBox& o) {
  if (this != &o) g_ = o.g_ ? std::make_unique<Graph>(*o.g_) : nullptr;
  return *this;
}
GraphBox& GraphBox::operator=(GraphBox&& o) noexcept = default;
GraphBox::~GraphBox() = default;

Attribute Attribute::GraphValue(Graph v) {
  Attribute a;
  a.type = AttrType::kGraph;
  a.g = GraphBox(std::move(v));
  return a;
}

std::string Node::DebugName() const { return "node '" + name + "' (" + op_type + ")"; }

int Graph::AddValue(const std::string& name, DType dtype, std::optional<SymShape> shape) {
  WH_CHECK(index_.count(name) == 0);
  Value v;
  v.name = name;
  v.dtype = dtype;
  v.shape = std::move(shape);
  values_.push_back(std::move(v));
  int id = static_cast<int>(values_.size()) - 1;
  index_[name] = id;
  return id;
}

int Graph::AddInitializer(const std::string& name, Tensor t) {
  int id = AddValue(name, t.dtype(), ToSymShape(t.dims()));
  values_[static_cast<size_t>(id)].initializer = std::move(t);
  return id;
}

int Graph::AddNode(Node n) {
  int idx = static_cast<int>(nodes_.size());
  for (int o : n.outputs)
    if (o >= 0) values_[static_cast<size_t>(o)].producer = idx;
  nodes_.push_back(std::move(n));
  return idx;
}

int Graph::AddOp(const std::string& name, const std::string& op_type, std::vector<int> inputs, AttributeMap attrs,
                 const std::string& domain) {
  auto taken = [&](const std::string& s) {
    if (index_.count(s)) return true;
    for (const Node& m : nodes_)
      if (m.name == s) return true;
    return false;
  };
  Node n;
  n.name = name;
  for (int i = 1; taken(n.name); ++i) n.name = name + "_" + std::to_string(i);
  n.op_type = op_type;
  n.domain = domain;
  n.inputs = std::move(inputs);
  n.attrs = std::move(attrs);
  n.outputs = {AddValue(UniqueName(n.name + "_out"))};
  const int out = n.outputs[0];
  AddNode(std::move(n));
  return out;
}

std::string Graph::UniqueName(const std::string& prefix) const {
  if (!index_.count(prefix)) return prefix;
  for (int i = 1;; ++i) {
    std::string n = prefix + "_" + std::to_string(i);
    if (!index_.count(n)) return n;
  }
}

int Graph::FindValue(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? -1 : it->second;
}

std::vector<int> Graph::Consumers(int value_id) const {
  std::vector<int> r;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const auto& in = nodes_[i].inputs;
    if (std::find(in.begin(), in.end(), value_id) != in.end()) r.push_back(static_cast<int>(i));
  }
  return r;
}

void Graph::RemoveNodes(const std::set<int>& dead) {
  if (dead.empty()) return;
  std::vector<Node> kept;
  kept.reserve(nodes_.size() - std::min(dead.size(), nodes_.size()));
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (!dead.count(static_cast<int>(i))) kept.push_back(std::move(nodes_[i]));
  nodes_ = std::move(kept);
  Reindex();
}

const Tensor* Graph::ConstInput(const Node& n, size_t slot) const {
  if (slot >= n.inputs.size() || n.inputs[slot] < 0) return nullptr;
  const Value& v = value(n.inputs[slot]);
  return v.initializer ? &*v.initializer : nullptr;
}

const Tensor* Graph::ConstInput(const Node& n, size_t slot, DType dtype) const {
  const Tensor* t = ConstInput(n, slot);
  return t && t->dtype() == dtype ? t : nullptr;
}

int Graph::SoleConsumer(int value_id) const {
  if (IsGraphOutput(value_id)) return -1;
  const std::vector<int> c = Consumers(value_id);
  if (c.size() != 1) return -1;
  int uses = 0;
  for (int i : nodes_[static_cast<size_t>(c[0])].inputs) uses += (i == value_id);
  return uses == 1 ? c[0] : -1;
}

bool Graph::IsGraphOutput(int value_id) const {
  return std::find(outputs_.begin(), outputs_.end(), value_id) != outputs_.end();
}

StatusOr<std::vector<int>> Graph::TopologicalOrder() const {
  const size_t n = nodes_.size();
  std::vector<int> indeg(n, 0);
  std::vector<std::vector<int>> succ(n);
  for (size_t i = 0; i < n; ++i) {
    std::set<int> preds;
    for (int v : nodes_[i].inputs) {
      if (v < 0) continue;
      int p = values_[static_cast<size_t>(v)].producer;
      if (p >= 0) preds.insert(p);
    }
    for (int p : preds) {
      succ[static_cast<size_t>(p)].push_back(static_cast<int>(i));
      ++indeg[i];
    }
  }
  std::vector<int> order;
  order.reserve(n);
  std::vector<int> ready;
  for (size_t i = n; i-- > 0;)
    if (indeg[i] == 0) ready.push_back(static_cast<int>(i));
  // Stable: process in original index order where possible.
  std::sort(ready.rbegin(), ready.rend());
  while (!ready.empty()) {
    int x = ready.back();
    ready.pop_back();
    order.push_back(x);
    for (int s : succ[static_cast<size_t>(x)])
      if (--indeg[static_cast<size_t>(s)] == 0) {
        ready.push_back(s);
        std::sort(ready.rbegin(), ready.rend());
      }
  }
  if (order.size() != n) {
    for (size_t i = 0; i < n; ++i)
      if (indeg[i] > 0) return InvalidArgument("graph has a cycle through " + nodes_[i].DebugName());
  }
  return order;
}

Status Graph::Verify() const {
  const int nv = static_cast<int>(values_.size());
  std::set<std::string> names;
  for (const Value& v : values_) {
    if (v.name.empty()) return InvalidArgument("a value has an empty name");
    if (!names.insert(v.name).second) return InvalidArgument("duplicate value name '" + v.name + "'");
  }
  std::vector<int> producer(static_cast<size_t>(nv), -1);
  std::set<int> is_input(inputs_.begin(), inputs_.end());
  for (int i : inputs_) {
    if (i < 0 || i >= nv) return InvalidArgument("graph input id out of range");
    if (values_[static_cast<size_t>(i)].is_constant()) continue;  // an input with a default
  }
  for (size_t ni = 0; ni < nodes_.size(); ++ni) {
    const Node& n = nodes_[ni];
    for (int o : n.outputs) {
      if (o < -1 || o >= nv) return InvalidArgument(n.DebugName() + " has an output id out of range");
      if (o < 0) continue;
      const Value& v = values_[static_cast<size_t>(o)];
      if (producer[static_cast<size_t>(o)] >= 0)
        return InvalidArgument("value '" + v.name + "' is produced by more than one node");
      if (v.is_constant()) return InvalidArgument("value '" + v.name + "' is both an initializer and a node output");
      if (is_input.count(o)) return InvalidArgument("value '" + v.name + "' is both a graph input and a node output");
      producer[static_cast<size_t>(o)] = static_cast<int>(ni);
    }
  }
  for (const Node& n : nodes_) {
    if (n.implicit_inputs < 0 || static_cast<size_t>(n.implicit_inputs) > n.inputs.size())
      return InvalidArgument(n.DebugName() + " has " + std::to_string(n.implicit_inputs) + " implicit inputs of " +
                             std::to_string(n.inputs.size()));
    for (const auto& [attr, sub] : n.attrs.Subgraphs()) {
      if (sub->outer_inputs != n.implicit_inputs || static_cast<size_t>(sub->outer_inputs) > sub->inputs().size())
        return InvalidArgument(n.DebugName() + ": subgraph '" + attr + "' reads " + std::to_string(sub->outer_inputs) +
                               " outer values but the node passes " + std::to_string(n.implicit_inputs));
      Status st = sub->Verify();
      if (!st.ok()) return st.WithContext(n.DebugName() + ": subgraph '" + attr + "'");
    }
    for (int i : n.inputs) {
      if (i < -1 || i >= nv) return InvalidArgument(n.DebugName() + " has an input id out of range");
      if (i < 0) continue;
      const Value& v = values_[static_cast<size_t>(i)];
      if (producer[static_cast<size_t>(i)] < 0 && !v.is_constant() && !is_input.count(i))
        return InvalidArgument(n.DebugName() + " reads '" + v.name +
                               "', which no node produces and which is neither an input nor an initializer");
    }
  }
  for (int o : outputs_) {
    if (o < 0 || o >= nv) return InvalidArgument("graph output id out of range");
    const Value& v = values_[static_cast<size_t>(o)];
    if (producer[static_cast<size_t>(o)] < 0 && !v.is_constant() && !is_input.count(o))
      return InvalidArgument("graph output '" + v.name + "' is never produced");
  }
  for (size_t i = 0; i < values_.size(); ++i)
    if (values_[i].producer != producer[i])
      return Internal("value '" + values_[i].name + "' has a stale producer index");
  auto order = TopologicalOrder();
  if (!order.ok()) return order.status();
  return Status::Ok();
}

Status Graph::Compact() {
  // Mark live nodes backwards from outputs.
  std::vector<bool> live_value(values_.size(), false), live_node(nodes_.size(), false);
  std::vector<int> stack(outputs_.begin(), outputs_.end());
  while (!stack.empty()) {
    int v = stack.back();
    stack.pop_back();
    if (v < 0 || live_value[static_cast<size_t>(v)]) continue;
    live_value[static_cast<size_t>(v)] = true;
    int p = values_[static_cast<size_t>(v)].producer;
    if (p >= 0 && !live_node[static_cast<size_t>(p)]) {
      live_node[static_cast<size_t>(p)] = true;
      for (int i : nodes_[static_cast<size_t>(p)].inputs) stack.push_back(i);
      for (int o : nodes_[static_cast<size_t>(p)].outputs)
        if (o >= 0) live_value[static_cast<size_t>(o)] = true;
    }
  }
  for (int i : inputs_) live_value[static_cast<size_t>(i)] = true;
  // Topological order of the live nodes.
  WH_ASSIGN_OR_RETURN(std::vector<int> order, TopologicalOrder());
  std::vector<int> remap(values_.size(), -1);
  std::vector<Value> nv;
  for (size_t i = 0; i < values_.size(); ++i)
    if (live_value[i]) {
      remap[i] = static_cast<int>(nv.size());
      nv.push_back(std::move(values_[i]));
    }
  auto rm = [&](int v) { return v < 0 ? -1 : remap[static_cast<size_t>(v)]; };
  std::vector<Node> nn;
  for (int ni : order) {
    if (!live_node[static_cast<size_t>(ni)]) continue;
    Node n = std::move(nodes_[static_cast<size_t>(ni)]);
    for (int& i : n.inputs) i = rm(i);
    for (int& o : n.outputs) o = rm(o);
    nn.push_back(std::move(n));
  }
  for (int& i : inputs_) i = rm(i);
  for (int& o : outputs_) o = rm(o);
  values_ = std::move(nv);
  nodes_ = std::move(nn);
  Reindex();
  return Status::Ok();
}

void Graph::Reindex() {
  index_.clear();
  for (size_t i = 0; i < values_.size(); ++i) {
    index_[values_[i].name] = static_cast<int>(i);
    values_[i].producer = -1;
  }
  for (size_t ni = 0; ni < nodes_.size(); ++ni)
    for (int o : nodes_[ni].outputs)
      if (o >= 0) values_[static_cast<size_t>(o)].producer = static_cast<int>(ni);
}

int64_t Graph::OpsetFor(const std::string& domain) const {
  std::string d = domain == "ai.onnx" ? "" : domain;
  auto it = opset_imports.find(d);
  return it == opset_imports.end() ? 0 : it->second;
}

}  // namespace whittle
