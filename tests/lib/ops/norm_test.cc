// BatchNormalization and LayerNormalization OpDefs: validation (training mode per opset) and shapes.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "lib/ops/op_def.h"
#include "tests/util/test_util.h"

namespace whittle {
namespace {

using ::whittle::testing::MakeNode;

struct Inferred {
  Status status;
  std::vector<std::optional<SymShape>> shapes;
  std::vector<DType> dtypes;
};

Inferred Infer(const Node& node, const std::vector<std::optional<SymShape>>& shapes, int opset = 17,
               DType dt = DType::kFloat32) {
  RegisterAllOps();
  const OpDef* def = OpRegistry::Global().Find(node.domain, node.op_type);
  EXPECT_NE(def, nullptr);
  InferContext ctx(node, opset);
  for (size_t i = 0; i < node.inputs.size(); ++i)
    ctx.AddInput(node.inputs[i] >= 0, dt, i < shapes.size() ? shapes[i] : std::nullopt, nullptr);
  for (int o : node.outputs) ctx.AddOutputSlot(o >= 0);
  Inferred r;
  r.status = InferNode(*def, ctx);
  for (int i = 0; r.status.ok() && i < ctx.num_outputs(); ++i) {
    r.shapes.push_back(ctx.OutputShape(i));
    r.dtypes.push_back(ctx.OutputDType(i));
  }
  return r;
}

Node WithAttrs(const std::string& op, int in, int out, std::vector<std::pair<std::string, Attribute>> attrs) {
  AttributeMap m;
  for (auto& [k, v] : attrs) m.Set(k, v);
  return MakeNode(op, in, out, m);
}

std::string S(const SymShape& s) { return SymShapeToString(s); }

const Dim kN = Dim::Symbol("N");

TEST(BatchNormOp, InfersAndValidates) {
  const Node bn = MakeNode("BatchNormalization", 5, 1);
  const SymShape c{16};
  Inferred r = Infer(bn, {SymShape{kN, 16, 28, 28}, c, c, c, c});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(S(*r.shapes[0]), S({kN, 16, 28, 28}));
  EXPECT_FALSE(Infer(bn, {SymShape{kN, 16, 28, 28}, SymShape{8}, c, c, c}).status.ok());
  EXPECT_FALSE(Infer(bn, {SymShape{16}, c, c, c, c}).status.ok());
  // spatial=0 in opset 7 takes parameters of X.shape[1:].
  const SymShape p{16, 4};
  EXPECT_TRUE(Infer(WithAttrs("BatchNormalization", 5, 1, {{"spatial", Attribute::Int(0)}}),
                    {SymShape{2, 16, 4}, p, p, p, p}, 7).status.ok());

  RegisterAllOps();
  EXPECT_TRUE(ValidateNode(bn, 15).ok());
  EXPECT_TRUE(ValidateNode(WithAttrs("BatchNormalization", 5, 1, {{"momentum", Attribute::Float(0.9f)},
                                                                 {"epsilon", Attribute::Float(1e-3f)}}), 15).ok());
  EXPECT_TRUE(ValidateNode(WithAttrs("BatchNormalization", 5, 1, {{"is_test", Attribute::Int(1)},
                                                                 {"spatial", Attribute::Int(1)}}), 6).ok());
  EXPECT_FALSE(ValidateNode(MakeNode("BatchNormalization", 4, 1), 15).ok());
  EXPECT_FALSE(ValidateNode(MakeNode("BatchNormalization", 5, 6), 15).ok());
}

TEST(BatchNormOp, TrainingModeValidation) {
  RegisterAllOps();
  const Node train3 = WithAttrs("BatchNormalization", 5, 3, {{"training_mode", Attribute::Int(1)}});
  EXPECT_TRUE(ValidateNode(train3, 15).ok());
  EXPECT_TRUE(ValidateNode(WithAttrs("BatchNormalization", 5, 1, {{"training_mode", Attribute::Int(1)}}), 14).ok());
  // Running statistics only exist in training mode; opset 14+ has at most 3 outputs.
  Status s = ValidateNode(MakeNode("BatchNormalization", 5, 3), 15);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("training_mode=1"), std::string::npos) << s.message();
  s = ValidateNode(WithAttrs("BatchNormalization", 5, 5, {{"training_mode", Attribute::Int(1)}}), 15);
  EXPECT_NE(s.message().find("at most 3 outputs"), std::string::npos) << s.message();
  // training_mode is an opset 14 attribute; opsets 7-13 train by asking for the statistics outputs.
  s = ValidateNode(WithAttrs("BatchNormalization", 5, 1, {{"training_mode", Attribute::Int(1)}}), 9);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("opset 14"), std::string::npos) << s.message();
  EXPECT_TRUE(ValidateNode(MakeNode("BatchNormalization", 5, 5), 9).ok());
  EXPECT_TRUE(ValidateNode(MakeNode("BatchNormalization", 5, 1), 6).ok());  // is_test=0: training
  EXPECT_FALSE(ValidateNode(WithAttrs("BatchNormalization", 5, 3, {{"is_test", Attribute::Int(1)}}), 6).ok());
}

TEST(BatchNormOp, InfersStatisticsOutputs) {
  const SymShape c{3};
  Inferred r = Infer(WithAttrs("BatchNormalization", 5, 3, {{"training_mode", Attribute::Int(1)}}),
                     {SymShape{kN, 3, 4, 5}, c, c, c, c}, 15);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(S(*r.shapes[0]), S({kN, 3, 4, 5}));
  EXPECT_EQ(S(*r.shapes[1]), S({3}));
  EXPECT_EQ(S(*r.shapes[2]), S({3}));
  r = Infer(MakeNode("BatchNormalization", 5, 5), {SymShape{kN, 3, 4, 5}, c, c, c, c}, 9, DType::kFloat64);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  for (int i = 1; i < 5; ++i) {
    EXPECT_EQ(S(*r.shapes[static_cast<size_t>(i)]), S({3}));
    EXPECT_EQ(r.dtypes[static_cast<size_t>(i)], DType::kFloat64);
  }
  // spatial=0 (opset 7): one statistic per element of X.shape[1:].
  const SymShape p{3, 4};
  r = Infer(WithAttrs("BatchNormalization", 5, 5, {{"spatial", Attribute::Int(0)}}), {SymShape{kN, 3, 4}, p, p, p, p},
            7);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(S(*r.shapes[4]), S({3, 4}));
}

TEST(LayerNormOp, InfersStatisticsShapes) {
  const Node ln = WithAttrs("LayerNormalization", 3, 3, {{"axis", Attribute::Int(-2)}});
  Inferred r = Infer(ln, {SymShape{kN, 3, 4, 5}, SymShape{4, 5}, SymShape{4, 5}});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(S(*r.shapes[0]), S({kN, 3, 4, 5}));
  EXPECT_EQ(S(*r.shapes[1]), S({kN, 3, 1, 1}));
  EXPECT_EQ(S(*r.shapes[2]), S({kN, 3, 1, 1}));
  EXPECT_EQ(r.dtypes[1], DType::kFloat32);
  // Default axis -1; double input keeps float32 statistics.
  r = Infer(MakeNode("LayerNormalization", 2, 2), {SymShape{2, 6}, SymShape{6}}, 17, DType::kFloat64);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.dtypes[0], DType::kFloat64);
  EXPECT_EQ(r.dtypes[1], DType::kFloat32);
  EXPECT_EQ(S(*r.shapes[1]), S({2, 1}));
  EXPECT_FALSE(Infer(WithAttrs("LayerNormalization", 2, 1, {{"axis", Attribute::Int(4)}}),
                     {SymShape{2, 3, 4, 5}, SymShape{5}}).status.ok());
  EXPECT_FALSE(Infer(WithAttrs("LayerNormalization", 2, 1, {{"axis", Attribute::Int(-5)}}),
                     {SymShape{2, 3, 4, 5}, SymShape{5}}).status.ok());

  RegisterAllOps();
  EXPECT_TRUE(ValidateNode(ln, 17).ok());
  EXPECT_FALSE(ValidateNode(ln, 16).ok());  // LayerNormalization starts at opset 17
  EXPECT_EQ(ValidateNode(WithAttrs("LayerNormalization", 2, 1, {{"stash_type", Attribute::Int(11)}}), 17).code(),
            StatusCode::kUnimplemented);
  EXPECT_FALSE(ValidateNode(MakeNode("LayerNormalization", 1, 1), 17).ok());
}

}  // namespace
}  // namespace whittle
