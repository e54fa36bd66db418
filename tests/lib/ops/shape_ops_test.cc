// Inference and validation of the shape ops (lib/ops/shape_ops.cc): symbolic dims, Reshape's
// 0/-1/allowzero rules, opset-dependent attribute/input forms and the errors they raise.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "lib/ops/op_def.h"
#include "tests/util/infer_test_util.h"
#include "tests/util/test_util.h"

namespace whittle {
namespace {

using ::whittle::testing::MakeNode;

using namespace ::whittle::testing;  // NOLINT: test helpers (tests/util/infer_test_util.h)

// ---------------------------------------------------------------- Flatten

TEST(ShapeOpsTest, FlattenKeepsSymbolicBatch) {
  Node n = MakeNode("Flatten", 1, 1, Attrs({{"axis", Attribute::Int(1)}}));
  EXPECT_TRUE(ShapeIs(Infer(n, 13, {Sh({kBatch, 1, 28, 28})}), {kBatch, 784}));
  Node n0 = MakeNode("Flatten", 1, 1, Attrs({{"axis", Attribute::Int(0)}}));
  EXPECT_TRUE(ShapeIs(Infer(n0, 13, {Sh({2, 3, 4})}), {1, 24}));
  // batch * 784 has no name: unknown.
  EXPECT_TRUE(ShapeIs(Infer(n0, 13, {Sh({kBatch, 1, 28, 28})}), {1, Dim()}));
  Node neg = MakeNode("Flatten", 1, 1, Attrs({{"axis", Attribute::Int(-1)}}));
  EXPECT_TRUE(ShapeIs(Infer(neg, 13, {Sh({2, 3, 4})}), {6, 4}));
  Node end = MakeNode("Flatten", 1, 1, Attrs({{"axis", Attribute::Int(3)}}));
  EXPECT_TRUE(ShapeIs(Infer(end, 13, {Sh({2, 3, 4})}), {24, 1}));
}

TEST(ShapeOpsTest, FlattenErrors) {
  Node n = MakeNode("Flatten", 1, 1, Attrs({{"axis", Attribute::Int(4)}}));
  EXPECT_TRUE(FailsWith(Infer(n, 13, {Sh({2, 3, 4})}).status, "node 'test_Flatten'"));
  EXPECT_TRUE(ShapeIs(Infer(n, 13, {NoRank()}), {Dim(), Dim()}));
}

// ---------------------------------------------------------------- Reshape

TEST(ShapeOpsTest, ReshapeConstantShapes) {
  Node n = MakeNode("Reshape", 2, 1);
  Tensor s1 = I64({0, -1});
  EXPECT_TRUE(ShapeIs(Infer(n, 14, {Sh({2, 3, 4}), Val(s1)}), {2, 12}));
  Tensor s2 = I64({4, 0, -1});
  EXPECT_TRUE(ShapeIs(Infer(n, 14, {Sh({2, 3, 4}), Val(s2)}), {4, 3, 2}));
  Tensor s3 = I64({-1});
  EXPECT_TRUE(ShapeIs(Infer(n, 14, {Sh({2, 3, 4}), Val(s3)}), {24}));
  Tensor s4 = I64({0, 0, 0});
  EXPECT_TRUE(ShapeIs(Infer(n, 14, {Sh({2, 3, 4}), Val(s4)}), {2, 3, 4}));
}

TEST(ShapeOpsTest, ReshapeSymbolicBatch) {
  Node n = MakeNode("Reshape", 2, 1);
  Tensor s = I64({-1, 784});
  EXPECT_TRUE(ShapeIs(Infer(n, 13, {Sh({kBatch, 1, 28, 28}), Val(s)}), {kBatch, 784}));
  Tensor s0 = I64({0, -1});
  EXPECT_TRUE(ShapeIs(Infer(n, 13, {Sh({kBatch, 3, 4}), Val(s0)}), {kBatch, 12}));
  // -1 = batch * 2: not a single symbol, so unknown rather than an error.
  Tensor s2 = I64({-1, 6});
  EXPECT_TRUE(ShapeIs(Infer(n, 13, {Sh({kBatch, 3, 4}), Val(s2)}), {Dim(), 6}));
  Tensor s3 = I64({2, -1});
  EXPECT_TRUE(ShapeIs(Infer(n, 13, {Sh({kBatch, 4}), Val(s3)}), {2, Dim()}));
  // Shape value unknown but its length known: rank known.
  EXPECT_TRUE(ShapeIs(Infer(n, 13, {Sh({2, 3, 4}), Sh({3}, DType::kInt64)}), {Dim(), Dim(), Dim()}));
}

TEST(ShapeOpsTest, ReshapeAllowZero) {
  Node n = MakeNode("Reshape", 2, 1, Attrs({{"allowzero", Attribute::Int(1)}}));
  Tensor s = I64({3, 4, 0});
  EXPECT_TRUE(ShapeIs(Infer(n, 14, {Sh({0, 3, 4}), Val(s)}), {3, 4, 0}));
  Tensor bad = I64({0, -1});
  EXPECT_TRUE(FailsWith(Infer(n, 14, {Sh({0, 3, 4}), Val(bad)}).status, "allowzero"));
  // Before opset 14 the attribute does not exist.
  EXPECT_TRUE(FailsWith(Validate(n, 13), "allowzero"));
  EXPECT_TRUE(Validate(n, 14).ok());
}

TEST(ShapeOpsTest, ReshapeErrors) {
  Node n = MakeNode("Reshape", 2, 1);
  Tensor mismatch = I64({5, 5});
  Status st = Infer(n, 14, {Sh({2, 3, 4}), Val(mismatch)}).status;
  EXPECT_TRUE(FailsWith(st, "node 'test_Reshape' (Reshape)"));
  EXPECT_TRUE(FailsWith(st, "24 elements"));
  Tensor two = I64({-1, -1});
  EXPECT_TRUE(FailsWith(Infer(n, 14, {Sh({2, 3, 4}), Val(two)}).status, "more than one -1"));
  Tensor indivisible = I64({5, -1});
  EXPECT_TRUE(FailsWith(Infer(n, 14, {Sh({2, 3, 4}), Val(indivisible)}).status, "not a multiple"));
  Tensor neg = I64({-2, 12});
  EXPECT_TRUE(FailsWith(Infer(n, 14, {Sh({2, 3, 4}), Val(neg)}).status, "invalid dim"));
  Tensor zero_past_rank = I64({2, 12, 0});
  EXPECT_TRUE(FailsWith(Infer(n, 14, {Sh({2, 12}), Val(zero_past_rank)}).status, "rank 2"));
}

// ---------------------------------------------------------------- Squeeze / Unsqueeze

TEST(ShapeOpsTest, SqueezeForms) {
  Node attr = MakeNode("Squeeze", 1, 1, Attrs({{"axes", Attribute::Ints({0, -2})}}));
  EXPECT_TRUE(ShapeIs(Infer(attr, 11, {Sh({1, 3, 1, 5})}), {3, 5}));
  Node input = MakeNode("Squeeze", 2, 1);
  Tensor axes = I64({0});
  EXPECT_TRUE(ShapeIs(Infer(input, 13, {Sh({1, kBatch, 5}), Val(axes)}), {kBatch, 5}));
  Node none = MakeNode("Squeeze", 1, 1);
  EXPECT_TRUE(ShapeIs(Infer(none, 13, {Sh({1, 3, 1, 5})}), {3, 5}));
  EXPECT_TRUE(ShapeIs(Infer(input, 13, {Sh({1, 3, 1}), Absent()}), {3}));
  // Without axes, a symbolic dim might be 1: rank unknown.
  Inferred r = Infer(none, 13, {Sh({1, kBatch, 5})});
  ASSERT_TRUE(r.status.ok());
  EXPECT_FALSE(r.shapes[0].has_value());
}

TEST(ShapeOpsTest, SqueezeErrors) {
  Node input = MakeNode("Squeeze", 2, 1);
  Tensor axes = I64({1});
  EXPECT_TRUE(FailsWith(Infer(input, 13, {Sh({1, 3}), Val(axes)}).status, "cannot squeeze axis 1 of size 3"));
  Tensor dup = I64({0, -2});
  EXPECT_TRUE(FailsWith(Infer(input, 13, {Sh({1, 1}), Val(dup)}).status, "repeated"));
  Tensor out_of_range = I64({2});
  EXPECT_TRUE(FailsWith(Infer(input, 13, {Sh({1, 1}), Val(out_of_range)}).status, "out of range"));
  Node attr13 = MakeNode("Squeeze", 1, 1, Attrs({{"axes", Attribute::Ints({0})}}));
  EXPECT_TRUE(FailsWith(Validate(attr13, 13), "opset 13"));
  EXPECT_TRUE(FailsWith(Validate(input, 11), "opset 13"));
}

TEST(ShapeOpsTest, Unsqueeze) {
  Node input = MakeNode("Unsqueeze", 2, 1);
  Tensor axes = I64({0, 4});
  EXPECT_TRUE(ShapeIs(Infer(input, 13, {Sh({kBatch, 4, 5}), Val(axes)}), {1, kBatch, 4, 5, 1}));
  Tensor unsorted = I64({5, 4, 0});  // the ONNX test_unsqueeze_unsorted_axes case
  EXPECT_TRUE(ShapeIs(Infer(input, 13, {Sh({3, 4, 5}), Val(unsorted)}), {1, 3, 4, 5, 1, 1}));
  Tensor neg = I64({-2});
  EXPECT_TRUE(ShapeIs(Infer(input, 13, {Sh({3, 4}), Val(neg)}), {3, 1, 4}));
  Node attr = MakeNode("Unsqueeze", 1, 1, Attrs({{"axes", Attribute::Ints({3})}}));
  EXPECT_TRUE(ShapeIs(Infer(attr, 11, {Sh({3, 4, 5})}), {3, 4, 5, 1}));
  Tensor dup = I64({1, 1});
  EXPECT_TRUE(FailsWith(Infer(input, 13, {Sh({3, 4}), Val(dup)}).status, "repeated"));
  Node missing = MakeNode("Unsqueeze", 1, 1);
  EXPECT_TRUE(FailsWith(Infer(missing, 13, {Sh({3})}).status, "axes"));
}

// ---------------------------------------------------------------- Identity / Dropout

TEST(ShapeOpsTest, IdentityAndDropout) {
  Node id = MakeNode("Identity", 1, 1);
  Inferred r = Infer(id, 16, {Sh({kBatch, 3}, DType::kInt64)});
  EXPECT_TRUE(ShapeIs(r, {kBatch, 3}));
  EXPECT_EQ(r.dtypes[0], DType::kInt64);

  Node d = MakeNode("Dropout", 1, 2);
  r = Infer(d, 13, {Sh({3, 4})});
  EXPECT_TRUE(ShapeIs(r, {3, 4}, 1));
  EXPECT_EQ(r.dtypes[1], DType::kBool);
  r = Infer(d, 9, {Sh({3, 4})});  // before opset 10 the mask has the input's type
  EXPECT_EQ(r.dtypes[1], DType::kFloat32);
}

TEST(ShapeOpsTest, DropoutTrainingMode) {
  Node d = MakeNode("Dropout", 3, 1);
  Tensor ratio = Tensor::Scalar<float>(0.3f), zero = Tensor::Scalar<float>(0.f);
  Tensor yes = Tensor::Scalar<bool>(true), no = Tensor::Scalar<bool>(false);
  Inferred t = Infer(d, 13, {Sh({3}), Val(ratio), Val(yes)});  // training: the kernels draw the mask
  EXPECT_TRUE(t.status.ok()) << t.status.message();
  EXPECT_TRUE(ShapeIs(t, {3}));
  Tensor not_bool = Tensor::Scalar<float>(1.f);
  EXPECT_TRUE(FailsWith(Infer(d, 13, {Sh({3}), Val(ratio), Val(not_bool)}).status, "training_mode"));
  EXPECT_TRUE(Infer(d, 13, {Sh({3}), Val(ratio), Val(no)}).status.ok());
  EXPECT_TRUE(Infer(d, 13, {Sh({3}), Val(zero), Val(yes)}).status.ok());  // ratio 0: identity
  Tensor bad = Tensor::Scalar<float>(1.5f);
  EXPECT_TRUE(FailsWith(Infer(d, 13, {Sh({3}), Val(bad), Val(no)}).status, "ratio"));
  Node old = MakeNode("Dropout", 1, 1, Attrs({{"ratio", Attribute::Float(0.2f)}}));
  EXPECT_TRUE(Validate(old, 11).ok());
  EXPECT_TRUE(FailsWith(Validate(old, 13), "ratio"));
}

// ---------------------------------------------------------------- Shape

TEST(ShapeOpsTest, ShapeStartEnd) {
  Node n = MakeNode("Shape", 1, 1, Attrs({{"start", Attribute::Int(1)}, {"end", Attribute::Int(-1)}}));
  Inferred r = Infer(n, 15, {Sh({3, 4, 5})});
  EXPECT_TRUE(ShapeIs(r, {1}));
  EXPECT_EQ(r.dtypes[0], DType::kInt64);
  Node clip = MakeNode("Shape", 1, 1, Attrs({{"start", Attribute::Int(-10)}, {"end", Attribute::Int(10)}}));
  EXPECT_TRUE(ShapeIs(Infer(clip, 15, {Sh({3, 4, 5})}), {3}));
  Node empty = MakeNode("Shape", 1, 1, Attrs({{"start", Attribute::Int(2)}, {"end", Attribute::Int(1)}}));
  EXPECT_TRUE(ShapeIs(Infer(empty, 15, {Sh({3, 4, 5})}), {0}));
  Node plain = MakeNode("Shape", 1, 1);
  EXPECT_TRUE(ShapeIs(Infer(plain, 13, {NoRank()}), {Dim()}));
  EXPECT_TRUE(FailsWith(Validate(n, 13), "opset 15"));
}

// ---------------------------------------------------------------- Constant / ConstantOfShape

TEST(ShapeOpsTest, ConstantForms) {
  Node ints = MakeNode("Constant", 0, 1, Attrs({{"value_ints", Attribute::Ints({1, 2, 3})}}));
  Inferred r = Infer(ints, 13, {});
  EXPECT_TRUE(ShapeIs(r, {3}));
  EXPECT_EQ(r.dtypes[0], DType::kInt64);
  Node f = MakeNode("Constant", 0, 1, Attrs({{"value_float", Attribute::Float(2.f)}}));
  r = Infer(f, 13, {});
  EXPECT_TRUE(ShapeIs(r, {}));
  EXPECT_EQ(r.dtypes[0], DType::kFloat32);
  Node t = MakeNode("Constant", 0, 1,
                    Attrs({{"value", Attribute::TensorValue(Tensor::FromVector<int32_t>({2, 2}, {1, 2, 3, 4}))}}));
  r = Infer(t, 13, {});
  EXPECT_TRUE(ShapeIs(r, {2, 2}));
  EXPECT_EQ(r.dtypes[0], DType::kInt32);
  EXPECT_TRUE(Validate(t, 13).ok());
}

TEST(ShapeOpsTest, ConstantErrors) {
  EXPECT_TRUE(FailsWith(Validate(MakeNode("Constant", 0, 1), 13), "exactly one"));
  Node two = MakeNode("Constant", 0, 1, Attrs({{"value_int", Attribute::Int(1)}, {"value_float", Attribute::Float(1)}}));
  EXPECT_TRUE(FailsWith(Validate(two, 13), "exactly one"));
  Node s = MakeNode("Constant", 0, 1, Attrs({{"value_string", Attribute::String("x")}}));
  EXPECT_EQ(Validate(s, 13).code(), StatusCode::kUnimplemented);
}

TEST(ShapeOpsTest, ConstantOfShape) {
  Node n = MakeNode("ConstantOfShape", 1, 1,
                    Attrs({{"value", Attribute::TensorValue(Tensor::FromVector<int32_t>({1}, {7}))}}));
  Tensor shape = I64({2, 3});
  Inferred r = Infer(n, 9, {Val(shape)});
  EXPECT_TRUE(ShapeIs(r, {2, 3}));
  EXPECT_EQ(r.dtypes[0], DType::kInt32);
  Node dflt = MakeNode("ConstantOfShape", 1, 1);
  r = Infer(dflt, 9, {Sh({2}, DType::kInt64)});
  EXPECT_TRUE(ShapeIs(r, {Dim(), Dim()}));
  EXPECT_EQ(r.dtypes[0], DType::kFloat32);
  Tensor neg = I64({2, -1});
  EXPECT_TRUE(FailsWith(Infer(dflt, 9, {Val(neg)}).status, "negative"));
  Node bad = MakeNode("ConstantOfShape", 1, 1,
                      Attrs({{"value", Attribute::TensorValue(Tensor::FromVector<float>({2}, {1, 2}))}}));
  EXPECT_TRUE(FailsWith(Validate(bad, 9), "exactly one element"));
}

}  // namespace
}  // namespace whittle
