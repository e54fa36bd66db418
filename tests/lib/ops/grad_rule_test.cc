// The gradient-rule registry (lib/ops/grad_rule.h): every family's rules are registered, and
// GradOf's dispatch — the rule a node gets, the nodes it emits, and the refusals that name the
// node (no rule, a second output's gradient, an op of another domain). The rules' arithmetic is
// checked against finite differences in tests/runtime/training/grad_rules_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "lib/ir/domain.h"
#include "lib/ops/emitter.h"
#include "lib/ops/grad_rule.h"

namespace whittle {
namespace {

// y = op(x) on float32 [2, 3] values, in a graph of opset 17.
struct OneNode {
  Graph g;
  Node n;
  OneNode(const std::string& op, const std::string& domain = "", int outputs = 1) {
    g.opset_imports[""] = 17;
    n.name = "node";
    n.op_type = op;
    n.domain = domain;
    n.inputs = {g.AddValue("x", DType::kFloat32, SymShape{Dim(2), Dim(3)})};
    for (int k = 0; k < outputs; ++k)
      n.outputs.push_back(g.AddValue("y" + std::to_string(k), DType::kFloat32, SymShape{Dim(2), Dim(3)}));
  }
  StatusOr<InputGrads> Grad(std::vector<int> dys) {
    Emitter e(g);
    const Node copy = n;
    return GradOf(e, g, copy, dys, [](size_t) { return true; }, GradContext());
  }
};

TEST(GradRegistry, EveryFamilyRegistersItsRules) {
  RegisterAllGrads();
  const GradRegistry& r = GradRegistry::Global();
  for (const char* op : {"Relu", "Sigmoid", "Add", "Div", "Gemm", "MatMul", "Conv", "MaxPool", "GlobalAveragePool",
                         "BatchNormalization", "LayerNormalization", "ReduceSum", "Softmax", "Reshape", "Dropout",
                         "Transpose", "Split", "Slice", "Gather", "QuantizeLinear", "DequantizeLinear"})
    EXPECT_NE(r.Find("", op), nullptr) << op;
  EXPECT_NE(r.Find("ai.onnx", "Relu"), nullptr);
  for (const char* op : {"CodebookMatMul", "BlockCirculantMatMul", "SignSte"})
    EXPECT_NE(r.Find(kWhittleDomain, op), nullptr) << op;
  EXPECT_EQ(r.Find("", "SignSte"), nullptr);
  EXPECT_EQ(r.Find("", "Sin"), nullptr);
  const std::vector<std::string> onnx = r.OpTypes("");
  EXPECT_EQ(onnx.size(), 46u);
  EXPECT_TRUE(std::is_sorted(onnx.begin(), onnx.end()));
  EXPECT_EQ(r.OpTypes(kWhittleDomain).size(), 3u);
}

TEST(GradRegistry, GradOfAppliesTheNodesRule) {
  OneNode t("Relu");
  const int dy = t.g.AddValue("dy", DType::kFloat32, SymShape{Dim(2), Dim(3)});
  auto r = t.Grad({dy});
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].first, 0u);
  const Node& emitted = t.g.nodes().back();
  EXPECT_EQ(emitted.op_type, "ReluGrad");
  EXPECT_EQ(emitted.domain, kWhittleDomain);
  EXPECT_EQ(emitted.inputs, (std::vector<int>{t.n.outputs[0], dy}));
  EXPECT_EQ(emitted.outputs[0], (*r)[0].second);
}

TEST(GradRegistry, NoGradientReachingTheNodeEmitsNothing) {
  OneNode t("Sin");  // no rule, but nothing to differentiate either
  auto r = t.Grad({-1});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->empty());
  EXPECT_TRUE(t.g.nodes().empty());
}

TEST(GradRegistry, RefusalsNameTheNode) {
  {
    OneNode t("Sin");
    auto r = t.Grad({t.g.AddValue("dy")});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("node 'node' (Sin): no gradient rule for Sin (supported: Add, "),
              std::string::npos)
        << r.status().message();
  }
  {
    OneNode t("Relu", "com.example");
    auto r = t.Grad({t.g.AddValue("dy")});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("no gradient rule for domain 'com.example'"), std::string::npos);
  }
  {
    OneNode t("TopK", "", 2);
    auto r = t.Grad({-1, t.g.AddValue("dy")});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("no gradient through output 1 of TopK"), std::string::npos);
  }
}

TEST(GradRegistry, SplitReadsEveryOutput) {
  OneNode t("Split", "", 2);
  const int dy1 = t.g.AddValue("dy1", DType::kFloat32, SymShape{Dim(2), Dim(3)});
  auto r = t.Grad({-1, dy1});  // output 0's gradient is zeros of its shape
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 1u);
  const Node& concat = t.g.nodes().back();
  EXPECT_EQ(concat.op_type, "Concat");
  ASSERT_EQ(concat.inputs.size(), 2u);
  EXPECT_EQ(concat.inputs[1], dy1);
  EXPECT_EQ(t.g.nodes()[t.g.nodes().size() - 2].op_type, "ConstantOfShape");
}

}  // namespace
}  // namespace whittle
