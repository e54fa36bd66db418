// The machinery that replaces one com.microsoft node by standard ops (lib/onnx/contrib_ops.cc for
// ONNX Runtime's float transformer ops, lib/onnx/contrib_quant_ops.cc for its quantized ones).
// Internal to lib/onnx.
#pragma once

#include <cmath>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "lib/ir/graph.h"
#include "lib/ir/status.h"

namespace whittle::contrib {

inline constexpr char kMs[] = "com.microsoft";

// The input in slot i, or -1 when absent.
inline int In(const Node& n, size_t i) { return i < n.inputs.size() ? n.inputs[i] : -1; }
// The output in slot i, or -1 when absent.
inline int Out(const Node& n, size_t i) { return i < n.outputs.size() ? n.outputs[i] : -1; }

// Emits the standard ops that replace one contrib node, in order, into `out`. Intermediate
// values and constants get fresh names under the node's; the node's own outputs keep their ids,
// so consumers and graph outputs need no rewiring.
class Expander {
 public:
  Expander(Graph& g, const Node& n, std::set<std::string>& node_names, std::vector<Node>& out)
      : g_(g), n_(n), names_(node_names), out_(out) {}

  // A node op(inputs) writing `to` (a fresh value when -1); returns its output.
  int Op(const std::string& op, std::vector<int> inputs, AttributeMap attrs = {}, int to = -1) {
    Node m;
    m.name = Fresh(n_.name + "/" + op);
    m.op_type = op;
    m.inputs = std::move(inputs);
    m.attrs = std::move(attrs);
    if (to < 0) to = g_.AddValue(g_.UniqueName(m.name + "_out"));
    m.outputs = {to};
    out_.push_back(std::move(m));
    return to;
  }
  // LayerNormalization over the last axis (the op from opset 17, else the form exporters write,
  // which the runtime fuses); mean/inv_std written where >= 0.
  void LayerNorm(int x, int gamma, int beta, float eps, int y_to, int mean_to, int inv_to) {
    if (g_.OpsetFor("") >= 17) {
      AttributeMap a;
      a.Set("axis", Attribute::Int(-1));
      a.Set("epsilon", Attribute::Float(eps));
      std::vector<int> ins = {x, gamma};
      if (beta >= 0) ins.push_back(beta);
      std::vector<int> outs = {y_to};
      if (mean_to >= 0 || inv_to >= 0) outs.push_back(mean_to);
      if (inv_to >= 0) outs.push_back(inv_to);
      MultiOp("LayerNormalization", ins, outs, a);
      return;
    }
    const int mean = MeanLast(x);
    if (mean_to >= 0) Op("Identity", {mean}, {}, mean_to);
    const int d = Op("Sub", {x, mean});
    const int sd = Op("Sqrt", {Op("Add", {MeanLast(Op("Mul", {d, d})), Scalar(eps)})});
    if (inv_to >= 0) Op("Reciprocal", {sd}, {}, inv_to);
    const int scaled = Op("Mul", {Op("Div", {d, sd}), gamma}, {}, beta >= 0 ? -1 : y_to);
    if (beta >= 0) Op("Add", {scaled, beta}, {}, y_to);
  }
  // A node with several outputs (LayerNormalization's y, mean, inv_std_dev), ids given.
  void MultiOp(const std::string& op, std::vector<int> inputs, std::vector<int> outputs, AttributeMap attrs) {
    Node m;
    m.name = Fresh(n_.name + "/" + op);
    m.op_type = op;
    m.inputs = std::move(inputs);
    m.outputs = std::move(outputs);
    m.attrs = std::move(attrs);
    out_.push_back(std::move(m));
  }
  // The node just emitted (to set what Op does not, such as a Scan's implicit inputs).
  Node& Last() { return out_.back(); }
  int Const(Tensor t) { return g_.AddInitializer(g_.UniqueName(n_.name + "/const"), std::move(t)); }
  int Scalar(float v) {
    return g_.AddInitializer(g_.UniqueName(n_.name + "/const"), Tensor::Scalar<float>(v));
  }
  int I32(const std::vector<int32_t>& v, bool scalar = false) {
    Dims d;
    if (!scalar) d.push_back(static_cast<int64_t>(v.size()));
    return g_.AddInitializer(g_.UniqueName(n_.name + "/const"), Tensor::FromVector<int32_t>(d, v));
  }
  int I64(const std::vector<int64_t>& v, bool scalar = false) {
    Dims d;
    if (!scalar) d.push_back(static_cast<int64_t>(v.size()));
    return g_.AddInitializer(g_.UniqueName(n_.name + "/const"), Tensor::FromVector<int64_t>(d, v));
  }
  int Ints(const std::vector<int64_t>& v) {
    return g_.AddInitializer(g_.UniqueName(n_.name + "/axes"),
                             Tensor::FromVector<int64_t>({static_cast<int64_t>(v.size())}, v));
  }
  // Split along `axis` into outs, sizes given: an input from opset 13, an attribute before.
  void Split(int x, int64_t axis, const std::vector<int64_t>& sizes, const std::vector<int>& outs) {
    AttributeMap a;
    a.Set("axis", Attribute::Int(axis));
    if (g_.OpsetFor("") >= 13) return MultiOp("Split", {x, I64(sizes)}, outs, a);
    a.Set("split", Attribute::Ints(sizes));
    MultiOp("Split", {x}, outs, a);
  }
  // ReduceMean over the last axis, keepdims 1: axes as an attribute before opset 18, an input from it.
  int MeanLast(int x) {
    AttributeMap a;
    a.Set("keepdims", Attribute::Int(1));
    if (g_.OpsetFor("") >= 18) return Op("ReduceMean", {x, Ints({-1})}, a);
    a.Set("axes", Attribute::Ints({-1}));
    return Op("ReduceMean", {x}, a);
  }
  // Unsqueeze / ReduceSum(keepdims 0): axes as an attribute before opset 13, an input from it.
  int Unsqueeze(int x, const std::vector<int64_t>& axes, int to = -1) {
    if (g_.OpsetFor("") >= 13) return Op("Unsqueeze", {x, I64(axes)}, {}, to);
    AttributeMap a;
    a.Set("axes", Attribute::Ints(axes));
    return Op("Unsqueeze", {x}, a, to);
  }
  int SumOver(int x, const std::vector<int64_t>& axes, int to) {
    AttributeMap a;
    a.Set("keepdims", Attribute::Int(0));
    if (g_.OpsetFor("") >= 13) return Op("ReduceSum", {x, I64(axes)}, a, to);
    a.Set("axes", Attribute::Ints(axes));
    return Op("ReduceSum", {x}, a, to);
  }
  // x + a (+ b), skipping absent operands; the last Add writes `to` when given.
  int Sum(int x, int a, int b, int to = -1) {
    if (a >= 0) x = Op("Add", {x, a}, {}, b >= 0 ? -1 : to);
    if (b >= 0) x = Op("Add", {x, b}, {}, to);
    return x;
  }
  // Gelu, erf form, as exporters write it (the runtime fuses it back into one op):
  // x · ½ · (1 + erf(x / √2)).
  int GeluErf(int x, int to) {
    const int e = Op("Erf", {Op("Div", {x, Scalar(static_cast<float>(std::sqrt(2.0)))})});
    return Op("Mul", {Op("Mul", {x, Op("Add", {e, Scalar(1.f)})}), Scalar(0.5f)}, {}, to);
  }
  // Gelu, tanh form: x · ½ · (1 + tanh(√(2/π) · (x + 0.044715 · x³))).
  int GeluTanh(int x, int to) {
    const int cube = Op("Pow", {x, Scalar(3.f)});
    const int inner = Op("Add", {x, Op("Mul", {cube, Scalar(0.044715f)})});
    const int t = Op("Tanh", {Op("Mul", {inner, Scalar(0.7978845608028654f)})});
    return Op("Mul", {Op("Mul", {x, Op("Add", {t, Scalar(1.f)})}), Scalar(0.5f)}, {}, to);
  }

 private:
  std::string Fresh(const std::string& base) {
    std::string s = base;
    for (int i = 1; names_.count(s) || g_.FindValue(s) >= 0; ++i) s = base + "_" + std::to_string(i);
    names_.insert(s);
    return s;
  }
  Graph& g_;
  const Node& n_;
  std::set<std::string>& names_;
  std::vector<Node>& out_;
};

inline Status Refuse(const Node& n, const std::string& why) {
  return Unimplemented(n.DebugName() + " (" + (n.domain.empty() ? std::string("ai.onnx") : n.domain) + "): " + why);
}

inline Status CheckInputs(const Node& n, size_t min, size_t max) {
  size_t given = n.inputs.size();
  while (given > 0 && n.inputs[given - 1] < 0) --given;
  if (given < min || given > max)
    return InvalidArgument(n.DebugName() + ": has " + std::to_string(given) + " inputs, expected " +
                           std::to_string(min) + (max == min ? "" : ".." + std::to_string(max)));
  for (size_t i = 0; i < min; ++i)
    if (n.inputs[i] < 0) return InvalidArgument(n.DebugName() + ": required input " + std::to_string(i) + " is missing");
  if (n.outputs.empty() || n.outputs[0] < 0) return InvalidArgument(n.DebugName() + ": has no output");
  return Status::Ok();
}

inline Status CheckOutputs(const Node& n, size_t max) {
  if (n.outputs.size() > max)
    return InvalidArgument(n.DebugName() + ": has " + std::to_string(n.outputs.size()) + " outputs, at most " +
                           std::to_string(max) + " expected");
  return Status::Ok();
}


// com.microsoft Attention from its projected [Q | K | V] (qkv: [B, S, sizes[0] + sizes[1] +
// sizes[2]]) on: `input` (its shape gives the batch), mask (-1 or the mask_index value),
// attention_bias (-1 or the value), past (-1 or [2, B, N, P, h] keys and values of earlier
// steps); writes n's output 0 and, where it is read, output 1 (present, [2, B, N, P + S, h]).
// unidirectional=1 hides later keys. Attributes read from n.
Status AttentionFromQkv(Graph& g, const Node& n, Expander& e, int qkv, int input, const std::vector<int64_t>& sizes,
                        int mask, int attention_bias, int past);
// The checks Attention and QAttention share: num_heads, no rotary, no shared past/present buffer
// or past_sequence_length (input past_slot + 2).
Status CheckAttentionForm(const Graph& g, const Node& n, size_t past_slot);
// The widths of Q, K and V: qkv_hidden_sizes, or a third each of the weights' (input 1) width.
StatusOr<std::vector<int64_t>> QkvSizes(const Graph& g, const Node& n);
// com.microsoft EmbedLayerNormalization on the given input ids (9 slots, -1 where absent:
// ids, segment_ids, word, position, segment, gamma, beta, mask, position_ids).
Status EmbedLayerNorm(Graph& g, const Node& n, Expander& e, const std::vector<int>& ins);
// ONNX Runtime's quantized ops (QGemm, QLinear*, QAttention, QEmbedLayerNormalization,
// DynamicQuantizeLSTM, DynamicQuantizeMatMul, MatMulIntegerToFloat); false when n is not one.
bool IsQuantContrib(const Node& n);
Status ExpandQuantContrib(Graph& g, const Node& n, Expander& e);

}  // namespace whittle::contrib
