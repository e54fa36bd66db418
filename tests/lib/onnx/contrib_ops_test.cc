// ExpandContribOps (lib/onnx/contrib_ops.h): what each contrib node becomes, and the forms it
// refuses with the node's name and the reason. Numerics against ONNX Runtime are ctest
// ort_tools_check's (tests/tools/ort_tools_check.py) on files ORT's optimizer wrote.
#include "lib/onnx/contrib_ops.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace whittle {
namespace {

// A graph with float input x [2, 4, 8] and one node of `op` reading `inputs` (names; "" absent).
struct OneNode {
  Graph g;
  Node* node = nullptr;
  OneNode(const std::string& op, const std::string& domain, const std::vector<std::string>& inputs,
          size_t outputs = 1, AttributeMap attrs = {}) {
    g.opset_imports[""] = 17;
    g.opset_imports["com.microsoft"] = 1;
    g.inputs().push_back(g.AddValue("x", DType::kFloat32, SymShape{Dim(2), Dim(4), Dim(8)}));
    Node n;
    n.name = "the_node";
    n.op_type = op;
    n.domain = domain;
    n.attrs = std::move(attrs);
    for (const std::string& i : inputs) {
      if (i.empty()) n.inputs.push_back(-1);
      else if (g.FindValue(i) >= 0) n.inputs.push_back(g.FindValue(i));
      else n.inputs.push_back(g.AddInitializer(i, Tensor(DType::kFloat32, {8})));
    }
    for (size_t k = 0; k < outputs; ++k) n.outputs.push_back(g.AddValue("y" + std::to_string(k)));
    g.AddNode(n);
    g.outputs().push_back(g.FindValue("y0"));
  }
  std::map<std::string, int> Ops() const {
    std::map<std::string, int> m;
    for (const Node& n : g.nodes()) ++m[(n.domain.empty() ? "" : n.domain + ".") + n.op_type];
    return m;
  }
};

TEST(ContribOps, SkipLayerNormalizationBecomesAddsAndLayerNormalizationKeepingItsOutputs) {
  OneNode t("SkipLayerNormalization", "com.microsoft", {"x", "x", "gamma", "beta", "bias"}, 4);
  int count = 0;
  ASSERT_TRUE(ExpandContribOps(t.g, &count).ok());
  EXPECT_EQ(count, 1);
  EXPECT_EQ(t.Ops(), (std::map<std::string, int>{{"Add", 2}, {"LayerNormalization", 1}}));
  // The node's outputs keep their ids: y0 from LayerNormalization, y3 (input + skip + bias) from the last Add.
  const Value& y0 = t.g.value(t.g.FindValue("y0"));
  const Value& y3 = t.g.value(t.g.FindValue("y3"));
  ASSERT_GE(y0.producer, 0);
  ASSERT_GE(y3.producer, 0);
  EXPECT_EQ(t.g.nodes()[static_cast<size_t>(y0.producer)].op_type, "LayerNormalization");
  EXPECT_EQ(t.g.nodes()[static_cast<size_t>(y3.producer)].op_type, "Add");
  EXPECT_TRUE(t.g.Verify().ok());
}

TEST(ContribOps, BeforeOpset17LayerNormIsWrittenAsExportersWriteIt) {
  OneNode t("SkipLayerNormalization", "com.microsoft", {"x", "x", "gamma"});
  t.g.opset_imports[""] = 13;
  ASSERT_TRUE(ExpandContribOps(t.g).ok());
  EXPECT_EQ(t.Ops().count("LayerNormalization"), 0u);
  EXPECT_EQ(t.Ops().at("ReduceMean"), 2);
  EXPECT_TRUE(t.g.Verify().ok());
}

TEST(ContribOps, DynamicQuantizeMatMulBecomesTheChainTheQuantizerWrote) {
  OneNode t("DynamicQuantizeMatMul", "com.microsoft", {"x", "w", "s", "", "bias"});
  ASSERT_TRUE(ExpandContribOps(t.g).ok());
  EXPECT_EQ(t.Ops(), (std::map<std::string, int>{
                         {"DynamicQuantizeLinear", 1}, {"MatMulInteger", 1}, {"Cast", 1}, {"Mul", 2}, {"Add", 1}}));
  EXPECT_TRUE(t.g.Verify().ok());
  // MatMulIntegerToFloat's a_scale must be one value: a per-row one is refused.
  OneNode u("MatMulIntegerToFloat", "com.microsoft", {"x", "w", "rows", "s"});
  Node& n = u.g.nodes()[0];
  n.inputs[2] = u.g.AddValue("row_scales", DType::kFloat32, SymShape{Dim(4), Dim(1)});
  u.g.inputs().push_back(n.inputs[2]);
  EXPECT_NE(ExpandContribOps(u.g).message().find("a_scale must be one value per tensor"), std::string::npos);
}

TEST(ContribOps, GraphsWithoutContribOpsAreUntouched) {
  OneNode t("Relu", "", {"x"});
  int count = -1;
  ASSERT_TRUE(ExpandContribOps(t.g, &count).ok());
  EXPECT_EQ(count, 0);
  EXPECT_EQ(t.Ops(), (std::map<std::string, int>{{"Relu", 1}}));
}

TEST(ContribOps, RefusedFormsNameTheNodeAndWhy) {
  struct Case {
    OneNode t;
    std::string want;
  };
  AttributeMap rotary, no_heads, batch, bad_act, axis0, concat;
  rotary.Set("num_heads", Attribute::Int(2));
  rotary.Set("do_rotary", Attribute::Int(1));
  concat.Set("axis", Attribute::Int(1));
  no_heads.Set("num_heads", Attribute::Int(0));
  batch.Set("transBatchA", Attribute::Int(1));
  bad_act.Set("activation", Attribute::String("Mish"));
  axis0.Set("axis", Attribute::Int(0));
  std::vector<Case> cases;
  cases.push_back({OneNode("Attention", "com.microsoft", {"x", "w"}, 1, rotary), "do_rotary=1 is not supported"});
  // x is float: an 8-bit op on it is told, and so is one whose 8-bit type nothing declares.
  cases.push_back({OneNode("QLinearSigmoid", "com.microsoft", {"x", "s", "", "s"}), "'x' is float32, expected uint8"});
  cases.push_back({OneNode("QLinearConcat", "com.microsoft", {"s", "z", "a", "s"}, 1, concat),
                   "a (tensor, scale, zero point) triple per input"});
  cases.push_back({OneNode("Attention", "com.microsoft", {"x", "w"}, 1, no_heads), "num_heads must be positive"});
  cases.push_back({OneNode("FusedMatMul", "com.microsoft", {"x", "x"}, 1, batch), "transBatchA/transBatchB"});
  cases.push_back({OneNode("FusedGemm", "com.microsoft", {"x", "w"}, 1, bad_act), "activation 'Mish'"});
  cases.push_back({OneNode("SimplifiedLayerNormalization", "", {"x", "scale"}, 1, axis0), "axis 0 is not supported"});
  cases.push_back({OneNode("BiasGelu", "com.microsoft", {"x"}), "has 1 inputs, expected 2"});
  cases.push_back({OneNode("EmbedLayerNormalization", "com.microsoft", {"x", "", "", "p", "", "g", "b"}, 2),
                   "required input 2 is missing"});
  cases.push_back({OneNode("QuickGelu", "com.microsoft", {"x"}, 3), "has 3 outputs, at most 1"});
  for (Case& c : cases) {
    const Status st = ExpandContribOps(c.t.g);
    EXPECT_FALSE(st.ok()) << c.want;
    EXPECT_NE(st.message().find("the_node"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find(c.want), std::string::npos) << st.message();
  }
}

TEST(ContribOps, AttentionWithoutAMaskOrWithAnUnknownOneIsTold) {
  AttributeMap a;
  a.Set("num_heads", Attribute::Int(2));
  // Weights [8, 24]: hidden 8 for each of Q, K, V.
  OneNode t("Attention", "com.microsoft", {"x", "", ""}, 1, a);
  Node& n = t.g.nodes()[0];
  n.inputs[1] = t.g.AddInitializer("w", Tensor(DType::kFloat32, {8, 24}));
  ASSERT_TRUE(ExpandContribOps(t.g).ok());
  EXPECT_EQ(t.Ops().at("Softmax"), 1);
  EXPECT_EQ(t.Ops().at("MatMul"), 3);
  EXPECT_TRUE(t.g.Verify().ok());

  OneNode u("Attention", "com.microsoft", {"x", "", "", "m"}, 1, a);
  Node& m = u.g.nodes()[0];
  m.inputs[1] = u.g.AddInitializer("w", Tensor(DType::kFloat32, {8, 24}));
  m.inputs[3] = u.g.AddValue("mask_of_unknown_rank", DType::kInt32);
  u.g.inputs().push_back(m.inputs[3]);
  const Status st = ExpandContribOps(u.g);
  EXPECT_NE(st.message().find("the rank of its mask_index cannot be told"), std::string::npos) << st.message();

  // An int32 [batch, keys] mask declared on the graph input is read (ids and masks are integers).
  OneNode v("Attention", "com.microsoft", {"x", "", "", "m"}, 1, a);
  Node& k = v.g.nodes()[0];
  k.inputs[1] = v.g.AddInitializer("w", Tensor(DType::kFloat32, {8, 24}));
  k.inputs[3] = v.g.AddValue("mask", DType::kInt32, SymShape{Dim(2), Dim(4)});
  v.g.inputs().push_back(k.inputs[3]);
  const Status ok = ExpandContribOps(v.g);
  EXPECT_TRUE(ok.ok()) << ok.message();
  EXPECT_EQ(v.Ops().at("Where"), 1);

  // A float16 model is refused by name (the added constants are float32).
  OneNode h("QuickGelu", "com.microsoft", {"x"});
  h.g.nodes()[0].inputs[0] = h.g.AddValue("half", DType::kFloat16);
  EXPECT_NE(ExpandContribOps(h.g).message().find("only float32 models are read"), std::string::npos);
}

// DynamicQuantizeLSTM becomes DynamicQuantizeLinear + MatMulInteger for X·W and one Scan per
// direction whose body reads R, its scale and zero point, the gate biases and the peepholes as
// outer values (implicit inputs bound to the body's trailing inputs).
TEST(ContribOps, DynamicQuantizeLstmBecomesAScanPerDirection) {
  AttributeMap a;
  a.Set("hidden_size", Attribute::Int(4));
  a.Set("direction", Attribute::String("bidirectional"));
  OneNode t("DynamicQuantizeLSTM", "com.microsoft", {"x", "", "", "", "", "", "", "", "ws", "wz", "rs", "rz"}, 3, a);
  Node& n = t.g.nodes()[0];
  n.inputs[1] = t.g.AddInitializer("w", Tensor(DType::kInt8, {2, 8, 16}));
  n.inputs[2] = t.g.AddInitializer("r", Tensor(DType::kInt8, {2, 4, 16}));
  n.inputs[3] = t.g.AddInitializer("b", Tensor(DType::kFloat32, {2, 32}));
  n.inputs[7] = t.g.AddInitializer("p", Tensor(DType::kFloat32, {2, 12}));
  ASSERT_TRUE(ExpandContribOps(t.g).ok());
  EXPECT_EQ(t.Ops().at("Scan"), 2);
  EXPECT_EQ(t.Ops().at("DynamicQuantizeLinear"), 1);
  EXPECT_TRUE(t.g.Verify().ok());
  for (const Node& m : t.g.nodes()) {
    if (m.op_type != "Scan") continue;
    EXPECT_EQ(m.implicit_inputs, 3 + 4 + 3);  // R, scale, zero point; 4 gate biases; 3 peepholes
    const auto subs = m.attrs.Subgraphs();
    ASSERT_EQ(subs.size(), 1u);
    const Graph& body = *subs[0].second;
    EXPECT_EQ(body.outer_inputs, m.implicit_inputs);
    EXPECT_EQ(body.formal_inputs(), 3u);  // h, c, X·W at t
    EXPECT_EQ(body.outputs().size(), 3u);
    EXPECT_TRUE(body.Verify().ok());
  }
  // sequence_lens is refused with the reason.
  OneNode u("DynamicQuantizeLSTM", "com.microsoft", {"x", "x", "x", "", "lens", "", "", "", "s", "z", "s", "z"}, 1, a);
  EXPECT_NE(ExpandContribOps(u.g).message().find("sequence_lens is not supported"), std::string::npos);
}

}  // namespace
}  // namespace whittle
