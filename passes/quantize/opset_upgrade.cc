#include "passes/quantize/opset_upgrade.h"

#include <set>

namespace whittle::quant {
namespace {

// Ops whose behaviour for every attribute combination valid at opsets 7..12 is unchanged at 13
// (newer versions only added types, optional inputs or attributes with the old default).
const std::set<std::string>& Unchanged() {
  static const std::set<std::string> s = {
      "Abs", "Add", "AveragePool", "BatchNormalization", "Cast", "Concat", "Constant", "Conv", "Div", "Elu", "Exp",
      "Flatten", "Gather", "Gemm", "GlobalAveragePool", "GlobalMaxPool", "Identity", "LeakyRelu", "Log", "MatMul",
      "Max", "MaxPool", "Min", "Mul", "Neg", "Pow", "Relu", "Reshape", "Shape", "Sigmoid", "Sqrt", "Sub", "Sum",
      "Tanh", "Transpose", "QuantizeLinear", "DequantizeLinear"};
  return s;
}

// Softmax/LogSoftmax before 13 flatten the input to 2-D at `axis`; for axis = rank-1 that is the
// same as the per-axis op of 13.
bool SoftmaxSame(const Graph& g, const Node& n) {
  const Value& x = g.value(n.inputs[0]);
  if (!x.shape) return false;
  const int64_t r = static_cast<int64_t>(x.shape->size());
  int64_t axis = n.attrs.GetInt("axis", 1);
  if (axis < 0) axis += r;
  return axis == r - 1;
}

}  // namespace

Status UpgradeOpsetTo13(Graph& g, std::vector<std::string>* notes) {
  const int64_t from = g.OpsetFor("");
  if (from >= kQuantOpset) return Status::Ok();
  // Check everything first so a refusal leaves the graph untouched.
  for (const Node& n : g.nodes()) {
    if (!n.domain.empty() && n.domain != "ai.onnx") continue;
    const std::string& op = n.op_type;
    if (Unchanged().count(op) || op == "Squeeze" || op == "Unsqueeze" || op == "Clip" || op == "Dropout") {
      if (op == "BatchNormalization" && n.attrs.Has("spatial") && n.attrs.GetInt("spatial", 1) != 1)
        return Unimplemented(n.DebugName() + ": spatial=0 has no opset-13 equivalent; --int8 needs opset 13");
      if (op == "Dropout" && n.outputs.size() > 1 && n.outputs[1] >= 0)
        return Unimplemented(n.DebugName() + ": its mask output cannot be converted to opset 13 by --int8");
      continue;
    }
    if ((op == "Softmax" || op == "LogSoftmax") && SoftmaxSame(g, n)) continue;
    return Unimplemented(n.DebugName() + ": --int8 raises the model's opset from " + std::to_string(from) +
                         " to 13 (per-axis quantization needs it), and this op's semantics change or are not "
                         "checked between those opsets; convert the model to opset 13 first");
  }
  int converted = 0;
  const size_t count = g.nodes().size();
  for (size_t i = 0; i < count; ++i) {
    Node& n = g.nodes()[i];
    if (!n.domain.empty() && n.domain != "ai.onnx") continue;
    if ((n.op_type == "Squeeze" || n.op_type == "Unsqueeze") && n.attrs.Has("axes")) {
      const std::vector<int64_t> axes = n.attrs.GetInts("axes");
      n.attrs.Erase("axes");
      const int id = g.AddInitializer(g.UniqueName(n.name + "_axes"), Tensor::FromVector<int64_t>({static_cast<int64_t>(axes.size())}, axes));
      g.nodes()[i].inputs.push_back(id);
      ++converted;
    } else if (n.op_type == "Clip" && from < 11 && (n.attrs.Has("min") || n.attrs.Has("max"))) {
      const float lo = n.attrs.GetFloat("min", -3.402823466e38f), hi = n.attrs.GetFloat("max", 3.402823466e38f);
      n.attrs.Erase("min");
      n.attrs.Erase("max");
      const int lo_id = g.AddInitializer(g.UniqueName(n.name + "_min"), Tensor::Scalar<float>(lo));
      const int hi_id = g.AddInitializer(g.UniqueName(n.name + "_max"), Tensor::Scalar<float>(hi));
      Node& m = g.nodes()[i];
      m.inputs.resize(1);
      m.inputs.push_back(lo_id);
      m.inputs.push_back(hi_id);
      ++converted;
    } else if (n.op_type == "Dropout") {
      // Inference-only graphs: Dropout is the identity at every opset; the ratio only matters in
      // training, and is_test went away in 7.
      n.attrs.Erase("ratio");
      n.attrs.Erase("is_test");
      ++converted;
    }
  }
  g.opset_imports[""] = kQuantOpset;
  notes->push_back("default-domain opset raised from " + std::to_string(from) + " to 13 for per-axis quantization" +
                   (converted ? " (" + std::to_string(converted) + " node(s) converted: attributes that became inputs)"
                              : std::string()));
  return Status::Ok();
}

}  // namespace whittle::quant
