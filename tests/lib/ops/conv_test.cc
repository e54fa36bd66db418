// Conv OpDef: attribute validation and shape inference (symbolic and concrete).
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
  std::optional<SymShape> shape;
  DType dtype = DType::kUndefined;
};

// Runs the op's inference with the given input shapes (nullopt: unknown rank).
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
  if (r.status.ok()) {
    r.shape = ctx.OutputShape(0);
    r.dtype = ctx.OutputDType(0);
  }
  return r;
}

Node ConvNode(std::vector<std::pair<std::string, Attribute>> attrs, int inputs = 2) {
  AttributeMap m;
  for (auto& [k, v] : attrs) m.Set(k, v);
  return MakeNode("Conv", inputs, 1, m);
}

const Dim kN = Dim::Symbol("N");

TEST(ConvOp, InfersOutputShapes) {
  struct Case {
    std::vector<std::pair<std::string, Attribute>> attrs;
    SymShape want;
  } cases[] = {
      {{}, {kN, 8, 30, 30}},
      {{{"pads", Attribute::Ints({1, 1, 1, 1})}}, {kN, 8, 32, 32}},
      {{{"pads", Attribute::Ints({1, 1, 1, 1})}, {"strides", Attribute::Ints({2, 2})}}, {kN, 8, 16, 16}},
      {{{"auto_pad", Attribute::String("SAME_UPPER")}, {"strides", Attribute::Ints({3, 3})}}, {kN, 8, 11, 11}},
      {{{"auto_pad", Attribute::String("SAME_LOWER")}}, {kN, 8, 32, 32}},
      {{{"auto_pad", Attribute::String("VALID")}, {"strides", Attribute::Ints({2, 1})}}, {kN, 8, 15, 30}},
      {{{"dilations", Attribute::Ints({2, 2})}}, {kN, 8, 28, 28}},
      {{{"pads", Attribute::Ints({0, 2, 1, 0})}, {"strides", Attribute::Ints({1, 2})}}, {kN, 8, 31, 16}},
  };
  for (const auto& c : cases) {
    Inferred r = Infer(ConvNode(c.attrs), {SymShape{kN, 3, 32, 32}, SymShape{8, 3, 3, 3}});
    ASSERT_TRUE(r.status.ok()) << r.status.message();
    ASSERT_TRUE(r.shape.has_value());
    EXPECT_EQ(SymShapeToString(*r.shape), SymShapeToString(c.want));
    EXPECT_EQ(r.dtype, DType::kFloat32);
  }
}

TEST(ConvOp, GroupsBiasAndUnknownDims) {
  Inferred r = Infer(ConvNode({{"group", Attribute::Int(4)}}, 3), {SymShape{2, 4, 10, Dim()}, SymShape{8, 1, 3, 3},
                                                                    SymShape{8}});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(SymShapeToString(*r.shape), SymShapeToString(SymShape{2, 8, 8, Dim()}));
  // 1-D and 3-D.
  r = Infer(ConvNode({{"strides", Attribute::Ints({2})}}), {SymShape{1, 2, 9}, SymShape{3, 2, 3}});
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(SymShapeToString(*r.shape), SymShapeToString(SymShape{1, 3, 4}));
  r = Infer(ConvNode({}), {SymShape{1, 2, 5, 6, 7}, SymShape{4, 2, 2, 3, 4}});
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(SymShapeToString(*r.shape), SymShapeToString(SymShape{1, 4, 4, 4, 4}));
  // Unknown X rank: output rank unknown, no error.
  r = Infer(ConvNode({}), {std::nullopt, SymShape{4, 2, 3, 3}});
  EXPECT_TRUE(r.status.ok());
  EXPECT_FALSE(r.shape.has_value());
}

TEST(ConvOp, InferErrors) {
  // Group does not match channels / does not divide output channels.
  EXPECT_FALSE(Infer(ConvNode({{"group", Attribute::Int(2)}}), {SymShape{1, 3, 8, 8}, SymShape{4, 1, 3, 3}}).status.ok());
  EXPECT_FALSE(Infer(ConvNode({{"group", Attribute::Int(2)}}), {SymShape{1, 4, 8, 8}, SymShape{3, 2, 3, 3}}).status.ok());
  // Channels mismatch without groups.
  EXPECT_FALSE(Infer(ConvNode({}), {SymShape{1, 3, 8, 8}, SymShape{4, 2, 3, 3}}).status.ok());
  // kernel_shape length or values inconsistent with W / rank.
  EXPECT_FALSE(Infer(ConvNode({{"kernel_shape", Attribute::Ints({3})}}), {SymShape{1, 3, 8, 8}, SymShape{4, 3, 3, 3}}).status.ok());
  EXPECT_FALSE(Infer(ConvNode({{"kernel_shape", Attribute::Ints({3, 5})}}), {SymShape{1, 3, 8, 8}, SymShape{4, 3, 3, 3}}).status.ok());
  // pads of the wrong length for the rank.
  EXPECT_FALSE(Infer(ConvNode({{"pads", Attribute::Ints({1, 1})}}), {SymShape{1, 3, 8, 8}, SymShape{4, 3, 3, 3}}).status.ok());
  // Ranks.
  EXPECT_FALSE(Infer(ConvNode({}), {SymShape{3, 8}, SymShape{4, 3}}).status.ok());
  EXPECT_FALSE(Infer(ConvNode({}), {SymShape{1, 3, 8, 8}, SymShape{4, 3, 3}}).status.ok());
  // Kernel larger than the input.
  EXPECT_FALSE(Infer(ConvNode({}), {SymShape{1, 3, 2, 2}, SymShape{4, 3, 3, 3}}).status.ok());
  // Bias of the wrong length.
  EXPECT_FALSE(Infer(ConvNode({}, 3), {SymShape{1, 3, 8, 8}, SymShape{4, 3, 3, 3}, SymShape{5}}).status.ok());
}

TEST(ConvOp, ValidateNodeRejectsBadAttributes) {
  RegisterAllOps();
  EXPECT_TRUE(ValidateNode(ConvNode({{"kernel_shape", Attribute::Ints({3, 3})}, {"pads", Attribute::Ints({1, 1, 1, 1})}}), 17).ok());
  EXPECT_TRUE(ValidateNode(ConvNode({{"_activation", Attribute::String("Relu")}}), 17).ok());
  const std::vector<std::vector<std::pair<std::string, Attribute>>> bad = {
      {{"kernel_shape", Attribute::Ints({3, -1})}},
      {{"kernel_shape", Attribute::Ints({3, 0})}},
      {{"kernel_shape", Attribute::Ints({3, 3})}, {"pads", Attribute::Ints({1, 1})}},
      {{"pads", Attribute::Ints({1, 1, 1})}},
      {{"pads", Attribute::Ints({1, -1, 1, 1})}},
      {{"strides", Attribute::Ints({0, 1})}},
      {{"strides", Attribute::Ints({1, 1})}, {"dilations", Attribute::Ints({1})}},
      {{"dilations", Attribute::Ints({0, 1})}},
      {{"group", Attribute::Int(0)}},
      {{"auto_pad", Attribute::String("SAME")}},
      {{"group", Attribute::Float(1.f)}},
      {{"bogus", Attribute::Int(1)}},
  };
  for (const auto& attrs : bad) EXPECT_FALSE(ValidateNode(ConvNode(attrs), 17).ok()) << attrs[0].first;
  // Arity.
  EXPECT_FALSE(ValidateNode(MakeNode("Conv", 1, 1), 17).ok());
  EXPECT_FALSE(ValidateNode(MakeNode("Conv", 4, 1), 17).ok());
}

}  // namespace
}  // namespace whittle
