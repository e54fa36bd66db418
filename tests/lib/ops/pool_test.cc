// Pooling OpDefs: attribute validation and shape inference (ceil mode, auto_pad, dilations,
// Indices output, global pools).
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

Inferred Infer(const Node& node, const std::vector<std::optional<SymShape>>& shapes, int opset = 12) {
  RegisterAllOps();
  const OpDef* def = OpRegistry::Global().Find(node.domain, node.op_type);
  EXPECT_NE(def, nullptr);
  InferContext ctx(node, opset);
  for (size_t i = 0; i < node.inputs.size(); ++i)
    ctx.AddInput(node.inputs[i] >= 0, DType::kFloat32, i < shapes.size() ? shapes[i] : std::nullopt, nullptr);
  for (int o : node.outputs) ctx.AddOutputSlot(o >= 0);
  Inferred r;
  r.status = InferNode(*def, ctx);
  for (int i = 0; r.status.ok() && i < ctx.num_outputs(); ++i) {
    r.shapes.push_back(ctx.OutputShape(i));
    r.dtypes.push_back(ctx.OutputDType(i));
  }
  return r;
}

Node Pool(const std::string& op, std::vector<std::pair<std::string, Attribute>> attrs, int outputs = 1) {
  AttributeMap m;
  for (auto& [k, v] : attrs) m.Set(k, v);
  return MakeNode(op, 1, outputs, m);
}

std::string S(const SymShape& s) { return SymShapeToString(s); }

const Dim kN = Dim::Symbol("N");

TEST(PoolOp, InfersShapes) {
  const SymShape x{kN, 3, 32, 32};
  struct Case {
    std::string op;
    std::vector<std::pair<std::string, Attribute>> attrs;
    SymShape want;
  } cases[] = {
      {"MaxPool", {{"kernel_shape", Attribute::Ints({2, 2})}}, {kN, 3, 31, 31}},
      {"MaxPool", {{"kernel_shape", Attribute::Ints({2, 2})}, {"strides", Attribute::Ints({2, 2})}}, {kN, 3, 16, 16}},
      {"MaxPool", {{"kernel_shape", Attribute::Ints({5, 5})}, {"strides", Attribute::Ints({3, 3})}}, {kN, 3, 10, 10}},
      {"MaxPool", {{"kernel_shape", Attribute::Ints({3, 3})}, {"strides", Attribute::Ints({2, 2})}, {"ceil_mode", Attribute::Int(1)}},
       {kN, 3, 16, 16}},
      {"MaxPool", {{"kernel_shape", Attribute::Ints({3, 3})}, {"strides", Attribute::Ints({2, 2})}}, {kN, 3, 15, 15}},
      {"MaxPool", {{"kernel_shape", Attribute::Ints({2, 2})}, {"dilations", Attribute::Ints({2, 2})}}, {kN, 3, 30, 30}},
      {"MaxPool", {{"kernel_shape", Attribute::Ints({2, 2})}, {"auto_pad", Attribute::String("SAME_UPPER")}}, {kN, 3, 32, 32}},
      {"AveragePool", {{"kernel_shape", Attribute::Ints({3, 3})}, {"pads", Attribute::Ints({2, 2, 2, 2})}}, {kN, 3, 34, 34}},
      {"AveragePool", {{"kernel_shape", Attribute::Ints({3, 3})}, {"auto_pad", Attribute::String("VALID")},
                       {"strides", Attribute::Ints({2, 2})}}, {kN, 3, 15, 15}},
      {"AveragePool", {{"kernel_shape", Attribute::Ints({3, 3})}, {"auto_pad", Attribute::String("SAME_LOWER")},
                       {"strides", Attribute::Ints({3, 3})}}, {kN, 3, 11, 11}},
  };
  for (const auto& c : cases) {
    Inferred r = Infer(Pool(c.op, c.attrs), {x});
    ASSERT_TRUE(r.status.ok()) << r.status.message();
    EXPECT_EQ(S(*r.shapes[0]), S(c.want));
  }
  // Indices output: int64 with Y's shape.
  Inferred r = Infer(Pool("MaxPool", {{"kernel_shape", Attribute::Ints({2, 2})}}, 2), {x});
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.dtypes[1], DType::kInt64);
  EXPECT_EQ(S(*r.shapes[1]), S({kN, 3, 31, 31}));
  // 1-D and 3-D.
  r = Infer(Pool("AveragePool", {{"kernel_shape", Attribute::Ints({2})}}), {SymShape{1, 3, 32}});
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(S(*r.shapes[0]), S({1, 3, 31}));
  r = Infer(Pool("MaxPool", {{"kernel_shape", Attribute::Ints({2, 2, 2})}}), {SymShape{1, 3, 4, Dim(), 6}});
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(S(*r.shapes[0]), S({1, 3, 3, Dim(), 5}));
}

TEST(PoolOp, GlobalPools) {
  for (const char* op : {"GlobalAveragePool", "GlobalMaxPool"}) {
    Inferred r = Infer(MakeNode(op, 1, 1), {SymShape{kN, 8, 7, 7}});
    ASSERT_TRUE(r.status.ok());
    EXPECT_EQ(S(*r.shapes[0]), S({kN, 8, 1, 1}));
    r = Infer(MakeNode(op, 1, 1), {SymShape{2, 8, 5}});
    EXPECT_EQ(S(*r.shapes[0]), S({2, 8, 1}));
    EXPECT_FALSE(Infer(MakeNode(op, 1, 1), {SymShape{2, 8}}).status.ok());
  }
}

TEST(PoolOp, InferErrors) {
  const SymShape x{1, 3, 8, 8};
  EXPECT_FALSE(Infer(Pool("MaxPool", {{"kernel_shape", Attribute::Ints({2})}}), {x}).status.ok());
  EXPECT_FALSE(Infer(Pool("MaxPool", {{"kernel_shape", Attribute::Ints({9, 9})}}), {x}).status.ok());
  EXPECT_FALSE(Infer(Pool("AveragePool", {{"kernel_shape", Attribute::Ints({2, 2})}, {"pads", Attribute::Ints({1, 1})}}),
                     {x}).status.ok());
  EXPECT_FALSE(Infer(Pool("MaxPool", {{"kernel_shape", Attribute::Ints({2, 2})}}), {SymShape{8, 8}}).status.ok());
}

TEST(PoolOp, ValidateNodeRejectsBadAttributes) {
  RegisterAllOps();
  EXPECT_TRUE(ValidateNode(Pool("MaxPool", {{"kernel_shape", Attribute::Ints({2, 2})}}, 2), 12).ok());
  const std::vector<std::pair<std::string, std::vector<std::pair<std::string, Attribute>>>> bad = {
      {"MaxPool", {}},  // kernel_shape is required
      {"AveragePool", {}},
      {"MaxPool", {{"kernel_shape", Attribute::Ints({-2, 2})}}},
      {"MaxPool", {{"kernel_shape", Attribute::Ints({2, 2})}, {"pads", Attribute::Ints({1, 1, 1})}}},
      {"MaxPool", {{"kernel_shape", Attribute::Ints({2, 2})}, {"pads", Attribute::Ints({1, 1})}}},
      {"MaxPool", {{"kernel_shape", Attribute::Ints({2, 2})}, {"strides", Attribute::Ints({1})}}},
      {"MaxPool", {{"kernel_shape", Attribute::Ints({2, 2})}, {"storage_order", Attribute::Int(2)}}},
      {"MaxPool", {{"kernel_shape", Attribute::Ints({2, 2})}, {"ceil_mode", Attribute::Int(3)}}},
      {"AveragePool", {{"kernel_shape", Attribute::Ints({2, 2})}, {"count_include_pad", Attribute::Int(-1)}}},
      {"AveragePool", {{"kernel_shape", Attribute::Ints({2, 2})}, {"dilations", Attribute::Ints({2, 2})}}},
      {"AveragePool", {{"kernel_shape", Attribute::Ints({2, 2})}, {"auto_pad", Attribute::String("FULL")}}},
  };
  for (const auto& [op, attrs] : bad) EXPECT_FALSE(ValidateNode(Pool(op, attrs), 12).ok()) << op;
  EXPECT_FALSE(ValidateNode(Pool("AveragePool", {{"kernel_shape", Attribute::Ints({2, 2})}}, 2), 12).ok());
  EXPECT_FALSE(ValidateNode(MakeNode("GlobalMaxPool", 2, 1), 12).ok());
}

}  // namespace
}  // namespace whittle
