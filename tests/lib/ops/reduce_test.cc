// Shape/type inference and validation of the reduction OpDefs (Reduce*, ArgMax/ArgMin, Softmax).
#include <gtest/gtest.h>

#include "lib/ops/op_def.h"
#include "tests/util/test_util.h"

namespace whittle {
namespace {

using testing::MakeNode;

struct Inferred {
  Status status;
  DType dtype = DType::kUndefined;
  std::optional<SymShape> shape;
};

// Input 0 is float32 with the given shape; input 1 (if any) is an int64 axes tensor.
Inferred Infer(const Node& node, std::optional<SymShape> shape, int opset = 17, const Tensor* axes = nullptr,
               bool axes_present = false, DType dtype = DType::kFloat32) {
  RegisterAllOps();
  const OpDef* def = OpRegistry::Global().Find("", node.op_type);
  EXPECT_NE(def, nullptr);
  if (!def) return {Internal("no def"), DType::kUndefined, std::nullopt};
  InferContext ctx(node, opset);
  ctx.AddInput(true, dtype, std::move(shape), nullptr);
  if (axes || axes_present)
    ctx.AddInput(true, DType::kInt64, axes ? std::optional<SymShape>(ToSymShape(axes->dims())) : std::nullopt, axes);
  ctx.AddOutputSlot(true);
  Inferred r;
  r.status = InferNode(*def, ctx);
  if (r.status.ok()) {
    r.dtype = ctx.OutputDType(0);
    r.shape = ctx.OutputShape(0);
  }
  return r;
}

SymShape S(std::initializer_list<Dim> dims) { return SymShape(dims); }

AttributeMap Attrs(std::vector<int64_t> axes, int64_t keepdims) {
  AttributeMap a;
  a.Set("axes", Attribute::Ints(std::move(axes)));
  a.Set("keepdims", Attribute::Int(keepdims));
  return a;
}

TEST(ReduceOpsTest, AxesAndKeepdims) {
  auto r = Infer(MakeNode("ReduceMean", 1, 1, Attrs({1}, 1)), S({Dim::Symbol("N"), 3, 4}));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.dtype, DType::kFloat32);
  EXPECT_EQ(*r.shape, S({Dim::Symbol("N"), 1, 4}));
  r = Infer(MakeNode("ReduceMax", 1, 1, Attrs({-1, 0}, 0)), S({2, 3, 4}));
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(*r.shape, S({3}));
  AttributeMap none;  // no axes: everything, keepdims defaults to 1
  r = Infer(MakeNode("ReduceL2", 1, 1, none), S({2, 3}));
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(*r.shape, S({1, 1}));
}

TEST(ReduceOpsTest, BadAxesAreErrors) {
  auto r = Infer(MakeNode("ReduceMean", 1, 1, Attrs({3}, 1)), S({2, 3, 4}));
  EXPECT_FALSE(r.status.ok());
  EXPECT_NE(r.status.message().find("out of range"), std::string::npos) << r.status.message();
  r = Infer(MakeNode("ReduceMean", 1, 1, Attrs({1, -2}, 1)), S({2, 3, 4}));
  EXPECT_FALSE(r.status.ok()) << "repeated axis";
  r = Infer(MakeNode("ReduceSum", 1, 1, Attrs({0}, 1)), S({2}), 11, nullptr, false, DType::kBool);
  EXPECT_FALSE(r.status.ok()) << "bool input";
}

TEST(ReduceOpsTest, ReduceSumAxesInputFromOpset13) {
  AttributeMap keep0;
  keep0.Set("keepdims", Attribute::Int(0));
  Tensor axes = Tensor::FromVector<int64_t>({2}, {0, -1});
  auto r = Infer(MakeNode("ReduceSum", 2, 1, keep0), S({2, 3, 4}), 13, &axes);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(*r.shape, S({3}));

  // Axes unknown until run time: rank survives with keepdims, dims become unknown.
  r = Infer(MakeNode("ReduceSum", 2, 1), S({2, 1, 4}), 13, nullptr, true);
  ASSERT_TRUE(r.status.ok());
  ASSERT_TRUE(r.shape);
  ASSERT_EQ(r.shape->size(), 3u);
  EXPECT_FALSE((*r.shape)[0].known());
  EXPECT_EQ((*r.shape)[1], Dim(1));
  r = Infer(MakeNode("ReduceSum", 2, 1, keep0), S({2, 1, 4}), 13, nullptr, true);
  ASSERT_TRUE(r.status.ok());
  EXPECT_FALSE(r.shape.has_value());

  AttributeMap noop;
  noop.Set("noop_with_empty_axes", Attribute::Int(1));
  Tensor empty(DType::kInt64, {0});
  r = Infer(MakeNode("ReduceSum", 2, 1, noop), S({2, 3}), 13, &empty);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(*r.shape, S({2, 3}));
  r = Infer(MakeNode("ReduceSum", 2, 1), S({2, 3}), 13, &empty);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(*r.shape, S({1, 1}));
}

TEST(ReduceOpsTest, ReduceSumAxesFormDependsOnOpset) {
  EXPECT_FALSE(ValidateNode(MakeNode("ReduceSum", 1, 1, Attrs({0}, 1)), 13).ok());
  EXPECT_TRUE(ValidateNode(MakeNode("ReduceSum", 1, 1, Attrs({0}, 1)), 11).ok());
  EXPECT_FALSE(ValidateNode(MakeNode("ReduceSum", 2, 1), 11).ok());
  EXPECT_TRUE(ValidateNode(MakeNode("ReduceSum", 2, 1), 13).ok());
  EXPECT_FALSE(ValidateNode(MakeNode("ReduceMean", 2, 1), 13).ok()) << "only ReduceSum takes axes as input in opset 17";
  AttributeMap noop;
  noop.Set("noop_with_empty_axes", Attribute::Int(1));
  EXPECT_FALSE(ValidateNode(MakeNode("ReduceMax", 1, 1, noop), 13).ok());
  // From opset 18 every Reduce* takes axes as an input.
  EXPECT_TRUE(ValidateNode(MakeNode("ReduceMean", 2, 1), 18).ok());
  EXPECT_TRUE(ValidateNode(MakeNode("ReduceMax", 1, 1, noop), 18).ok());
  EXPECT_FALSE(ValidateNode(MakeNode("ReduceMean", 1, 1, Attrs({0}, 1)), 18).ok());
}

TEST(ReduceOpsTest, ArgMaxGivesInt64) {
  AttributeMap a;
  a.Set("axis", Attribute::Int(-1));
  a.Set("keepdims", Attribute::Int(0));
  auto r = Infer(MakeNode("ArgMax", 1, 1, a), S({2, 3, 4}));
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.dtype, DType::kInt64);
  EXPECT_EQ(*r.shape, S({2, 3}));
  AttributeMap b;
  r = Infer(MakeNode("ArgMin", 1, 1, b), S({2, 3, 4}));
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(*r.shape, S({1, 3, 4}));
  a.Set("axis", Attribute::Int(3));
  EXPECT_FALSE(Infer(MakeNode("ArgMax", 1, 1, a), S({2, 3, 4})).status.ok());
}

TEST(ReduceOpsTest, SoftmaxAxisRangeIsChecked) {
  for (const char* op : {"Softmax", "LogSoftmax", "Hardmax"}) {
    AttributeMap a;
    a.Set("axis", Attribute::Int(3));
    auto r = Infer(MakeNode(op, 1, 1, a), S({2, 3, 4}));
    EXPECT_FALSE(r.status.ok()) << op;
    EXPECT_NE(r.status.message().find("out of range"), std::string::npos) << r.status.message();
    a.Set("axis", Attribute::Int(-4));
    EXPECT_FALSE(Infer(MakeNode(op, 1, 1, a), S({2, 3, 4})).status.ok()) << op;
    a.Set("axis", Attribute::Int(-3));
    r = Infer(MakeNode(op, 1, 1, a), S({2, 3, 4}));
    ASSERT_TRUE(r.status.ok()) << op;
    EXPECT_EQ(*r.shape, S({2, 3, 4}));
  }
  // Default axis: 1 before opset 13 (out of range for rank 1), -1 from 13.
  AttributeMap none;
  EXPECT_FALSE(Infer(MakeNode("Softmax", 1, 1, none), S({5}), 11).status.ok());
  EXPECT_TRUE(Infer(MakeNode("Softmax", 1, 1, none), S({5}), 13).status.ok());
  EXPECT_FALSE(Infer(MakeNode("Softmax", 1, 1, none), S({5}), 13, nullptr, false, DType::kInt32).status.ok());
}

}  // namespace
}  // namespace whittle
