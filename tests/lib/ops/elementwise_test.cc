// Shape/type inference and validation of the element-wise OpDefs.
#include <gtest/gtest.h>

#include "lib/ops/op_def.h"
#include "tests/util/test_util.h"

namespace whittle {
namespace {

using testing::MakeNode;

struct In {
  DType dtype;
  std::optional<SymShape> shape;
  const Tensor* value = nullptr;
};

struct Inferred {
  Status status;
  DType dtype = DType::kUndefined;
  std::optional<SymShape> shape;
};

Inferred Infer(const Node& node, const std::vector<In>& inputs, int opset = 17) {
  RegisterAllOps();
  const OpDef* def = OpRegistry::Global().Find(node.domain, node.op_type);
  EXPECT_NE(def, nullptr) << node.op_type;
  if (!def) return {Internal("no def"), DType::kUndefined, std::nullopt};
  InferContext ctx(node, opset);
  for (const In& in : inputs) ctx.AddInput(in.dtype != DType::kUndefined, in.dtype, in.shape, in.value);
  for (size_t i = 0; i < node.outputs.size(); ++i) ctx.AddOutputSlot(true);
  Inferred r;
  r.status = InferNode(*def, ctx);
  if (r.status.ok()) {
    r.dtype = ctx.OutputDType(0);
    r.shape = ctx.OutputShape(0);
  }
  return r;
}

SymShape S(std::initializer_list<Dim> dims) { return SymShape(dims); }

TEST(ElementwiseOpsTest, AddBroadcastsSymbolicShapes) {
  auto r = Infer(MakeNode("Add", 2, 1), {{DType::kFloat32, S({Dim::Symbol("N"), 3, 4})}, {DType::kFloat32, S({4})}});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.dtype, DType::kFloat32);
  ASSERT_TRUE(r.shape);
  EXPECT_EQ(*r.shape, S({Dim::Symbol("N"), 3, 4}));

  r = Infer(MakeNode("Mul", 2, 1), {{DType::kInt64, S({2, 1, 5})}, {DType::kInt64, S({3, 1})}});
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.dtype, DType::kInt64);
  EXPECT_EQ(*r.shape, S({2, 3, 5}));
}

TEST(ElementwiseOpsTest, IncompatibleBroadcastIsAnError) {
  auto r = Infer(MakeNode("Add", 2, 1), {{DType::kFloat32, S({2, 3})}, {DType::kFloat32, S({4, 3})}});
  EXPECT_FALSE(r.status.ok());
  EXPECT_NE(r.status.message().find("test_Add"), std::string::npos) << r.status.message();
  r = Infer(MakeNode("Where", 3, 1),
            {{DType::kBool, S({2, 1})}, {DType::kFloat32, S({3})}, {DType::kFloat32, S({5})}});
  EXPECT_FALSE(r.status.ok());
}

TEST(ElementwiseOpsTest, MixedInputTypesAreRejected) {
  auto r = Infer(MakeNode("Add", 2, 1), {{DType::kFloat32, S({2})}, {DType::kInt64, S({2})}});
  EXPECT_FALSE(r.status.ok());
  r = Infer(MakeNode("Sub", 2, 1), {{DType::kBool, S({2})}, {DType::kBool, S({2})}});
  EXPECT_FALSE(r.status.ok()) << "bool arithmetic";
  r = Infer(MakeNode("And", 2, 1), {{DType::kFloat32, S({2})}, {DType::kFloat32, S({2})}});
  EXPECT_FALSE(r.status.ok()) << "And needs bool";
  // Pow is the exception: its exponent may have another type.
  r = Infer(MakeNode("Pow", 2, 1), {{DType::kFloat32, S({3})}, {DType::kInt64, S({3})}});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.dtype, DType::kFloat32);
}

TEST(ElementwiseOpsTest, ComparisonsAndPredicatesGiveBool) {
  for (const char* op : {"Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual"}) {
    auto r = Infer(MakeNode(op, 2, 1), {{DType::kInt32, S({3, 4})}, {DType::kInt32, S({4})}});
    ASSERT_TRUE(r.status.ok()) << op;
    EXPECT_EQ(r.dtype, DType::kBool) << op;
    EXPECT_EQ(*r.shape, S({3, 4}));
  }
  auto r = Infer(MakeNode("IsNaN", 1, 1), {{DType::kFloat32, S({6})}});
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.dtype, DType::kBool);
  r = Infer(MakeNode("Not", 1, 1), {{DType::kInt32, S({6})}});
  EXPECT_FALSE(r.status.ok());
}

TEST(ElementwiseOpsTest, WhereBroadcastsThreeInputs) {
  auto r = Infer(MakeNode("Where", 3, 1), {{DType::kBool, S({2, 1})}, {DType::kInt64, S({1, 3})}, {DType::kInt64, S({})}});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.dtype, DType::kInt64);
  EXPECT_EQ(*r.shape, S({2, 3}));
  r = Infer(MakeNode("Where", 3, 1), {{DType::kFloat32, S({2})}, {DType::kFloat32, S({2})}, {DType::kFloat32, S({2})}});
  EXPECT_FALSE(r.status.ok()) << "condition must be bool";
}

TEST(ElementwiseOpsTest, UnknownRankStaysUnknown) {
  auto r = Infer(MakeNode("Add", 2, 1), {{DType::kFloat32, std::nullopt}, {DType::kFloat32, S({3})}});
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.dtype, DType::kFloat32);
  EXPECT_FALSE(r.shape.has_value());
}

TEST(ElementwiseOpsTest, CastInfersTargetTypeAndRejectsStrings) {
  AttributeMap a;
  a.Set("to", Attribute::Int(static_cast<int64_t>(DType::kInt64)));
  Node cast = MakeNode("Cast", 1, 1, a);
  EXPECT_TRUE(ValidateNode(cast, 13).ok());
  auto r = Infer(cast, {{DType::kFloat32, S({2, Dim::Symbol("T")})}});
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.dtype, DType::kInt64);
  EXPECT_EQ(*r.shape, S({2, Dim::Symbol("T")}));

  AttributeMap s;
  s.Set("to", Attribute::Int(static_cast<int64_t>(DType::kString)));
  Status st = ValidateNode(MakeNode("Cast", 1, 1, s), 13);
  EXPECT_EQ(st.code(), StatusCode::kUnimplemented) << st.message();
  EXPECT_NE(st.message().find("string"), std::string::npos);

  AttributeMap bad;
  bad.Set("to", Attribute::Int(14));  // complex128
  EXPECT_EQ(ValidateNode(MakeNode("Cast", 1, 1, bad), 13).code(), StatusCode::kUnimplemented);
  EXPECT_FALSE(ValidateNode(MakeNode("Cast", 1, 1), 13).ok()) << "'to' is required";

  auto like = Infer(MakeNode("CastLike", 2, 1), {{DType::kFloat64, S({3, 4})}, {DType::kFloat16, S({1})}});
  ASSERT_TRUE(like.status.ok());
  EXPECT_EQ(like.dtype, DType::kFloat16);
  EXPECT_EQ(*like.shape, S({3, 4}));
}

TEST(ElementwiseOpsTest, ClipBoundsFollowTheOpset) {
  AttributeMap a;
  a.Set("min", Attribute::Float(0.f));
  EXPECT_TRUE(ValidateNode(MakeNode("Clip", 1, 1, a), 6).ok());
  EXPECT_FALSE(ValidateNode(MakeNode("Clip", 1, 1, a), 13).ok()) << "min is an input from opset 11";
  EXPECT_FALSE(ValidateNode(MakeNode("Clip", 3, 1), 6).ok()) << "no bound inputs before opset 11";
  EXPECT_TRUE(ValidateNode(MakeNode("Clip", 3, 1), 13).ok());
  auto r = Infer(MakeNode("Clip", 3, 1), {{DType::kFloat32, S({3, 4})}, {DType::kFloat32, S({})}, {DType::kFloat32, S({2})}});
  EXPECT_FALSE(r.status.ok()) << "bounds must be scalars";
  r = Infer(MakeNode("Clip", 3, 1), {{DType::kInt8, S({3, 4})}, {DType::kInt8, S({})}, {DType::kInt8, S({})}});
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.dtype, DType::kInt8);
  EXPECT_EQ(*r.shape, S({3, 4}));
}

TEST(ElementwiseOpsTest, LegacyAndUnknownAttributesAreRejected) {
  AttributeMap axis;
  axis.Set("broadcast", Attribute::Int(1));
  axis.Set("axis", Attribute::Int(1));
  EXPECT_EQ(ValidateNode(MakeNode("Add", 2, 1, axis), 6).code(), StatusCode::kUnimplemented);
  AttributeMap bcast;
  bcast.Set("broadcast", Attribute::Int(1));
  EXPECT_TRUE(ValidateNode(MakeNode("Add", 2, 1, bcast), 6).ok());
  AttributeMap unknown;
  unknown.Set("gamma", Attribute::Float(1.f));
  EXPECT_FALSE(ValidateNode(MakeNode("Relu", 1, 1, unknown), 14).ok());
  AttributeMap wrong_type;
  wrong_type.Set("alpha", Attribute::Int(1));
  EXPECT_FALSE(ValidateNode(MakeNode("LeakyRelu", 1, 1, wrong_type), 16).ok());
}

TEST(ElementwiseOpsTest, ModAndBitShiftAttributes) {
  auto r = Infer(MakeNode("Mod", 2, 1), {{DType::kFloat32, S({3})}, {DType::kFloat32, S({3})}});
  EXPECT_FALSE(r.status.ok()) << "float Mod needs fmod=1";
  AttributeMap f;
  f.Set("fmod", Attribute::Int(1));
  r = Infer(MakeNode("Mod", 2, 1, f), {{DType::kFloat32, S({3})}, {DType::kFloat32, S({3})}});
  EXPECT_TRUE(r.status.ok()) << r.status.message();
  AttributeMap dir;
  dir.Set("direction", Attribute::String("UP"));
  EXPECT_FALSE(ValidateNode(MakeNode("BitShift", 2, 1, dir), 11).ok());
  EXPECT_FALSE(ValidateNode(MakeNode("BitShift", 2, 1), 11).ok()) << "direction is required";
}

TEST(ElementwiseOpsTest, PReluSlopeBroadcastsOnlyToX) {
  auto r = Infer(MakeNode("PRelu", 2, 1), {{DType::kFloat32, S({3, 4, 5})}, {DType::kFloat32, S({5})}});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(*r.shape, S({3, 4, 5}));
  r = Infer(MakeNode("PRelu", 2, 1), {{DType::kFloat32, S({4, 5})}, {DType::kFloat32, S({3, 4, 5})}});
  EXPECT_FALSE(r.status.ok());
}

TEST(ElementwiseOpsTest, VariadicOpsTakeAnyNumberOfInputs) {
  auto r = Infer(MakeNode("Max", 3, 1),
                 {{DType::kFloat32, S({3, 1})}, {DType::kFloat32, S({1, 4})}, {DType::kFloat32, S({4})}});
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(*r.shape, S({3, 4}));
  EXPECT_TRUE(ValidateNode(MakeNode("Sum", 1, 1), 13).ok());
  EXPECT_TRUE(ValidateNode(MakeNode("Mean", 5, 1), 13).ok());
  r = Infer(MakeNode("Sum", 2, 1), {{DType::kInt32, S({3})}, {DType::kInt32, S({3})}});
  EXPECT_FALSE(r.status.ok()) << "Sum is float-only";
}

}  // namespace
}  // namespace whittle
