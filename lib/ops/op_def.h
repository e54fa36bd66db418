// OpDef: everything Whittle knows about an operator apart from how to compute it — ONNX name and
// domain, arity, attribute schema, op-specific attribute checks and shape/type inference.
// Inference works on symbolic shapes at load time and on concrete shapes at run time (the
// runtime calls the same function with every input value known), so output shapes are defined
// once. Every op family registers itself from RegisterAllOps(); nothing else is a central switch.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "lib/ir/graph.h"
#include "lib/ir/status.h"

namespace whittle {

// One element of a propagated shape value (lib/ops/shape_values.h): a number of any sign, or a
// symbol ("batch") whose number is only known at run time; unknown when neither.
struct SymInt {
  std::optional<int64_t> value;
  std::string symbol;
  static SymInt Of(int64_t v) { SymInt s; s.value = v; return s; }
  static SymInt FromDim(const Dim& d) { SymInt s; if (d.known()) s.value = d.value; else s.symbol = d.param; return s; }
  bool known() const { return value.has_value(); }
  bool operator==(const SymInt& o) const { return value == o.value && symbol == o.symbol; }
};
using ShapeValue = std::vector<SymInt>;

class InferContext {
 public:
  InferContext(const Node& node, int opset) : node_(node), opset_(opset) {}

  const Node& node() const { return node_; }
  const AttributeMap& attrs() const { return node_.attrs; }
  int opset() const { return opset_; }
  int num_inputs() const { return static_cast<int>(in_dtype_.size()); }
  int num_outputs() const { return static_cast<int>(out_dtype_.size()); }
  bool HasInput(int i) const { return i < num_inputs() && in_present_[static_cast<size_t>(i)]; }
  DType InputDType(int i) const { return HasInput(i) ? in_dtype_[static_cast<size_t>(i)] : DType::kUndefined; }
  // nullptr when the rank is unknown or the input is absent.
  const SymShape* InputShape(int i) const {
    return HasInput(i) && in_shape_[static_cast<size_t>(i)] ? &*in_shape_[static_cast<size_t>(i)] : nullptr;
  }
  // The input's value when it is known (an initializer at load time; always at run time).
  // Each call that hands out a value is recorded (ValueReads): the runtime's plan cache
  // (runtime/session.cc) re-checks exactly those inputs before it reuses an output shape.
  const Tensor* InputValue(int i) const {
    const Tensor* v = HasInput(i) ? in_value_[static_cast<size_t>(i)] : nullptr;
    if (HasInput(i)) value_asks_ |= uint64_t{1} << std::min(i, 63);
    if (v) value_reads_ |= uint64_t{1} << std::min(i, 63);
    return v;
  }
  // Bit i: the value of input i was read (bit 63: some input at index >= 63).
  uint64_t ValueReads() const { return value_reads_; }
  // Bit i: the value of present input i was asked for, whether or not it was known (a device
  // session shows device tensors without values and downloads only those asked for).
  uint64_t ValueAsks() const { return value_asks_; }
  bool HasOutput(int i) const { return i < num_outputs() && out_present_[static_cast<size_t>(i)]; }

  void SetOutput(int i, DType dtype, std::optional<SymShape> shape) {
    out_dtype_[static_cast<size_t>(i)] = dtype;
    out_shape_[static_cast<size_t>(i)] = std::move(shape);
  }
  // Sequences and optionals (only ops whose OpDef::any_kind is set see or make them): input i's
  // kind, and output i's (kTensor unless set; its dtype is then the element type, its shape none).
  ValueKind InputKind(int i) const { return HasInput(i) ? in_kind_[static_cast<size_t>(i)] : ValueKind::kTensor; }
  void SetOutputKind(int i, ValueKind k) { out_kind_[static_cast<size_t>(i)] = k; }
  ValueKind OutputKind(int i) const { return out_kind_[static_cast<size_t>(i)]; }
  DType OutputDType(int i) const { return out_dtype_[static_cast<size_t>(i)]; }
  const std::optional<SymShape>& OutputShape(int i) const { return out_shape_[static_cast<size_t>(i)]; }

  // Data propagation of shape tensors (lib/ops/shape_values.h): the elements of a small integer
  // input (rank 0 or 1) as Dims, symbolic where only a name is known (Shape of an input with a
  // symbolic batch); nullptr when not derivable. At load time only; at run time every value is known.
  const ShapeValue* InputSymValue(int i) const {
    return i < static_cast<int>(in_symval_.size()) ? in_symval_[static_cast<size_t>(i)] : nullptr;
  }
  void SetInputSymValue(int i, const ShapeValue* v) {
    if (static_cast<int>(in_symval_.size()) <= i) in_symval_.resize(static_cast<size_t>(i) + 1, nullptr);
    in_symval_[static_cast<size_t>(i)] = v;
  }
  // Error naming this node.
  Status Error(const std::string& what) const { return InvalidArgument(node_.DebugName() + ": " + what); }

  // Filled by the caller (shape inference or the runtime).
  void AddInput(bool present, DType dt, std::optional<SymShape> shape, const Tensor* value,
                ValueKind kind = ValueKind::kTensor) {
    in_kind_.push_back(kind);
    in_present_.push_back(present);
    in_dtype_.push_back(dt);
    in_shape_.push_back(std::move(shape));
    in_value_.push_back(value);
  }
  void AddOutputSlot(bool present) {
    out_present_.push_back(present);
    out_kind_.push_back(ValueKind::kTensor);
    out_dtype_.push_back(DType::kUndefined);
    out_shape_.push_back(std::nullopt);
  }

 private:
  const Node& node_;
  int opset_;
  std::vector<bool> in_present_;
  std::vector<ValueKind> in_kind_, out_kind_;
  std::vector<DType> in_dtype_;
  std::vector<std::optional<SymShape>> in_shape_;
  std::vector<const Tensor*> in_value_;
  mutable uint64_t value_reads_ = 0, value_asks_ = 0;
  std::vector<const ShapeValue*> in_symval_;
  std::vector<bool> out_present_;
  std::vector<DType> out_dtype_;
  std::vector<std::optional<SymShape>> out_shape_;
};

struct AttrSpec {
  std::string name;
  AttrType type;
  bool required = false;
};

struct OpDef {
  std::string domain;  // "" for ai.onnx
  std::string op_type;
  int since_opset = 1;  // oldest opset of its domain whose semantics we implement
  int min_inputs = 1, max_inputs = 1;
  int min_outputs = 1, max_outputs = 1;
  // Every attribute the op has in any supported opset. Unknown names are rejected.
  std::vector<AttrSpec> attrs;
  // Op-specific attribute checks (ranges, lengths); may be empty.
  std::function<Status(const Node&, int opset)> check;
  // Output dtypes and shapes from inputs; must give concrete shapes when all inputs are concrete
  // and their values are known.
  std::function<Status(InferContext&)> infer;
  // Newest ai.onnx opset whose semantics the implementation was written for. A model of a newer
  // opset is accepted when the op's schema did not change incompatibly in between
  // (lib/ops/schema_compat.h), else refused naming the change.
  int max_opset = 17;
  // Control flow (If, Loop, Scan): binds the node's subgraphs' inputs to the dtypes and shapes of
  // its inputs (`inputs`, null where absent; implicit inputs last) and infers the subgraphs, before
  // `infer` reads their outputs' types. Empty for every other op.
  std::function<Status(Node& node, int opset, const std::vector<const Value*>& inputs)> infer_subgraphs = {};
  // Whether its inputs and outputs may be sequences or optionals (the Sequence* and Optional*
  // ops, Identity, If, Loop): its `infer` then sets each output's kind. Every other op takes
  // tensors only, and shape inference refuses a sequence or optional input naming it.
  bool any_kind = false;
};

class OpRegistry {
 public:
  static OpRegistry& Global();
  void Register(OpDef def);
  const OpDef* Find(const std::string& domain, const std::string& op_type) const;
  std::vector<const OpDef*> All() const;

 private:
  std::vector<std::unique_ptr<OpDef>> defs_;
};

// Registers every op family (idempotent, thread-safe).
void RegisterAllOps();

// Checks a node against its OpDef: known op and domain, arity, attribute names and types, and the
// op's own check. The message names the node and what was expected.
Status ValidateNode(const Node& node, int opset);

// Fills dtype and shape of every non-constant value in topological order. Values whose shape
// cannot be inferred keep shape == nullopt. Fails on type or shape conflicts.
Status InferShapes(Graph& graph);

// Runs one node's inference with the given inputs; used by InferShapes and the runtime.
// On success ctx's outputs hold dtypes and shapes.
Status InferNode(const OpDef& def, InferContext& ctx);

}  // namespace whittle
