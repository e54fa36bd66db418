// Graph: the model IR. Nodes live in a vector; values are addressed by integer id (index into
// values()). A value carries dtype and an optional symbolic shape; initializers are values with
// a constant Tensor. Graph::Verify() checks references, unique names, single producers and the
// absence of cycles. Passes match first, then apply, then call Compact() and Verify().
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "lib/ir/attribute.h"
#include "lib/ir/domain.h"
#include "lib/ir/status.h"
#include "lib/ir/tensor.h"

namespace whittle {

// Dim and SymShape (symbolic shapes) are public API: include/whittle/types.h.

struct Value {
  std::string name;
  DType dtype = DType::kUndefined;  // a sequence's or optional's element type
  std::optional<SymShape> shape;  // nullopt: rank unknown (always, for a sequence or an optional)
  ValueKind kind = ValueKind::kTensor;
  int producer = -1;              // node index, -1 for graph inputs and initializers
  std::optional<Tensor> initializer;
  // Concrete dims seen when one sample (batch 1) ran through the model: the cost model's fallback
  // where static inference leaves dims unknown (passes/cost.h ObserveShapes). Not saved.
  std::optional<Dims> observed;
  bool is_constant() const { return initializer.has_value(); }
};

struct Node {
  std::string name;
  std::string op_type;
  std::string domain;            // "" is the default ONNX domain ("ai.onnx")
  std::vector<int> inputs;       // value ids; -1 for an absent optional input
  std::vector<int> outputs;      // value ids; -1 for an absent optional output
  AttributeMap attrs;
  // The trailing inputs that are outer-scope values its subgraphs read (ONNX lets an If branch or a
  // Loop body name any value of an enclosing graph): made explicit at load, bound in order to each
  // subgraph's trailing Graph::outer_inputs, so liveness, topological order and renames see them.
  // Not written to a file (the subgraphs name the outer values there).
  int implicit_inputs = 0;
  size_t explicit_inputs() const { return inputs.size() - static_cast<size_t>(implicit_inputs); }
  std::string DebugName() const;  // "node 'name' (OpType)"
};

class Graph {
 public:
  // Adds a value; the name must be unique (WH_CHECK). Returns its id.
  int AddValue(const std::string& name, DType dtype = DType::kUndefined, std::optional<SymShape> shape = std::nullopt);
  int AddInitializer(const std::string& name, Tensor t);
  // Adds a node and sets the producer of its outputs. Returns its index.
  int AddNode(Node n);
  // A fresh value name with the given prefix that no value uses yet.
  std::string UniqueName(const std::string& prefix) const;
  // Appends a node with one output, as the rewrites that lower or lift an op emit them: named
  // `name`, or name_<i> where a node or value has that name already (ONNX Runtime refuses two
  // nodes of one name), its output a fresh value named after it. Returns the output's id.
  int AddOp(const std::string& name, const std::string& op_type, std::vector<int> inputs, AttributeMap attrs = {},
            const std::string& domain = "");

  int FindValue(const std::string& name) const;  // -1 if absent
  Value& value(int id) { return values_[static_cast<size_t>(id)]; }
  const Value& value(int id) const { return values_[static_cast<size_t>(id)]; }
  std::vector<Value>& values() { return values_; }
  const std::vector<Value>& values() const { return values_; }
  std::vector<Node>& nodes() { return nodes_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  std::vector<int>& inputs() { return inputs_; }     // graph inputs (not initializers)
  const std::vector<int>& inputs() const { return inputs_; }
  std::vector<int>& outputs() { return outputs_; }
  const std::vector<int>& outputs() const { return outputs_; }

  // Node indices that read value id (a node appears once even if it reads the value twice).
  std::vector<int> Consumers(int value_id) const;
  bool IsGraphOutput(int value_id) const;
  // Node indices in an order where producers come first; error on a cycle.
  StatusOr<std::vector<int>> TopologicalOrder() const;
  // Structural checks: ids in range, unique value names, one producer per value, no cycles,
  // every node input produced, an input or an initializer.
  Status Verify() const;
  // Drops nodes whose outputs are unused (transitively) and values nobody references, and
  // sorts nodes topologically. Ids change: call after a pass has finished editing.
  Status Compact();
  // Rebuilds the name index and producers after direct edits of values()/nodes().
  void Reindex();
  // Removes the nodes with the given indices and reindexes; values only they produced dangle
  // until Compact() drops them.
  void RemoveNodes(const std::set<int>& dead);

  // The initializer behind input `slot` of n, or null (no such input, or not a constant).
  const Tensor* ConstInput(const Node& n, size_t slot) const;
  // The same, only when the initializer has element type `dtype`.
  const Tensor* ConstInput(const Node& n, size_t slot, DType dtype) const;
  // The only node reading value_id, reading it once; -1 when it is a graph output or has other
  // readers.
  int SoleConsumer(int value_id) const;

  int64_t OpsetFor(const std::string& domain) const;  // 0 if not imported
  std::map<std::string, int64_t> opset_imports;       // "" for ai.onnx
  std::string name = "main";
  std::string producer_name;
  std::string producer_version;
  int64_t ir_version = 8;
  int64_t model_version = 0;
  std::string doc_string;
  std::map<std::string, std::string> metadata;
  // A subgraph's last outer_inputs inputs are the outer-scope values it reads, bound to its node's
  // implicit inputs (Node::implicit_inputs); 0 for a model's main graph.
  int outer_inputs = 0;
  size_t formal_inputs() const { return inputs_.size() - static_cast<size_t>(outer_inputs); }

 private:
  std::vector<Node> nodes_;
  std::vector<Value> values_;
  std::vector<int> inputs_;
  std::vector<int> outputs_;
  std::unordered_map<std::string, int> index_;
};

}  // namespace whittle
