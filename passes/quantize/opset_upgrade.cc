#include "passes/quantize/opset_upgrade.h"

#include "lib/ops/schema_compat.h"

namespace whittle::quant {
namespace {

// Softmax/LogSoftmax/Hardmax before 13 flatten the input to 2-D at `axis`; for axis = rank-1 that
// is the same as the per-axis op of 13.
bool SoftmaxSame(const Graph& g, const Node& n) {
  const Value& x = g.value(n.inputs[0]);
  if (!x.shape) return false;
  const int64_t r = static_cast<int64_t>(x.shape->size());
  int64_t axis = n.attrs.GetInt("axis", 1);
  if (axis < 0) axis += r;
  return axis == r - 1;
}

// Reduce ops whose 'axes' attribute became an input at opset 18 (ReduceSum's did at 13).
bool ReduceAxesAt18(const std::string& op) {
  return op == "ReduceMean" || op == "ReduceMax" || op == "ReduceMin" || op == "ReduceProd" || op == "ReduceL1" ||
         op == "ReduceL2" || op == "ReduceLogSum" || op == "ReduceLogSumExp" || op == "ReduceSumSquare";
}

// Ops converted below when their schema changed between from and to: an attribute that became
// an input.
bool AttrBecomesInput(const std::string& op, int64_t from, int64_t to) {
  if (ReduceAxesAt18(op)) return from < 18 && to >= 18;
  return op == "Squeeze" || op == "Unsqueeze" || op == "ReduceSum" || op == "Split" || op == "Clip" || op == "Dropout";
}

// Empty when n can be carried from opset `from` to `to`, else why not.
std::string Blocker(const Graph& g, const Node& n, int64_t from, int64_t to) {
  const std::string& op = n.op_type;
  if (op == "BatchNormalization") {
    if (n.attrs.Has("spatial") && n.attrs.GetInt("spatial", 1) != 1) return "spatial=0 has no opset-13 equivalent";
    for (size_t i = 1; i < n.outputs.size(); ++i)
      if (n.outputs[i] >= 0) return "its training outputs cannot be carried to opset 13";
    return "";
  }
  if (op == "Dropout") {
    if (n.outputs.size() > 1 && n.outputs[1] >= 0) return "its mask output cannot be carried to opset 13";
    return "";
  }
  if (AttrBecomesInput(op, from, to)) return "";
  std::string why;
  if ((op == "Softmax" || op == "LogSoftmax" || op == "Hardmax") && from < 13 && SoftmaxSame(g, n))
    return to <= 13 || OpUnchangedBetween(op, 13, to, &why) ? "" : why;
  if (OpUnchangedBetween(op, from, to, &why)) return "";
  return why;
}

// Moves an ints attribute to a new int64 initializer input (at the end of the inputs).
void AttrToInput(Graph& g, size_t i, const std::string& attr, const std::string& suffix) {
  Node& n = g.nodes()[i];
  const std::vector<int64_t> v = n.attrs.GetInts(attr);
  n.attrs.Erase(attr);
  const std::string name = g.UniqueName(n.name + suffix);
  const int id = g.AddInitializer(name, Tensor::FromVector<int64_t>({static_cast<int64_t>(v.size())}, v));
  g.nodes()[i].inputs.push_back(id);
}

}  // namespace

Status UpgradeOpsetTo13(Graph& g, std::vector<std::string>* notes) {
  return UpgradeOpset(g, kQuantOpset, "--int8", "per-axis quantization", notes);
}

Status UpgradeOpset(Graph& g, int64_t to, const std::string& flag, const std::string& purpose,
                    std::vector<std::string>* notes) {
  const int64_t from = g.OpsetFor("");
  if (from >= to) return Status::Ok();
  const std::string target = std::to_string(to);
  // Check everything first so a refusal leaves the graph untouched.
  for (const Node& n : g.nodes()) {
    if (!n.domain.empty() && n.domain != "ai.onnx") continue;
    const std::string why = Blocker(g, n, from, to);
    if (!why.empty())
      return Unimplemented(n.DebugName() + ": " + flag + " raises the model's opset from " + std::to_string(from) +
                           " to " + target + " (" + purpose + " needs it), and this op changed in between (" + why +
                           "); convert the model to opset " + target + " first");
  }
  int converted = 0;
  const size_t count = g.nodes().size();
  for (size_t i = 0; i < count; ++i) {
    Node& n = g.nodes()[i];
    if (!n.domain.empty() && n.domain != "ai.onnx") continue;
    const std::string& op = n.op_type;
    if (ReduceAxesAt18(op) && from < 18 && to >= 18 && n.attrs.Has("axes")) {
      g.nodes()[i].inputs.resize(1);
      AttrToInput(g, i, "axes", "_axes");
      ++converted;
    } else if (from >= 13) {
      // The conversions below are those of opset 13.
    } else if ((op == "Squeeze" || op == "Unsqueeze" || op == "ReduceSum") && n.attrs.Has("axes")) {
      // The data input stays first; axes becomes input 1.
      g.nodes()[i].inputs.resize(1);
      AttrToInput(g, i, "axes", "_axes");
      ++converted;
    } else if (op == "Split" && n.attrs.Has("split")) {
      g.nodes()[i].inputs.resize(1);
      AttrToInput(g, i, "split", "_split");
      ++converted;
    } else if (op == "Clip" && from < 11 && (n.attrs.Has("min") || n.attrs.Has("max"))) {
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
    } else if (op == "Dropout") {
      // Inference-only graphs: Dropout is the identity at every opset; the ratio only matters in
      // training, and is_test went away in 7.
      n.attrs.Erase("ratio");
      n.attrs.Erase("is_test");
      ++converted;
    } else if (op == "BatchNormalization") {
      n.attrs.Erase("spatial");  // checked to be 1, the only meaning it has from opset 9
    }
  }
  g.opset_imports[""] = to;
  notes->push_back("default-domain opset raised from " + std::to_string(from) + " to " + target + " for " + purpose +
                   (converted ? " (" + std::to_string(converted) + " node(s) converted: attributes that became inputs)"
                              : std::string()));
  return Status::Ok();
}

}  // namespace whittle::quant
