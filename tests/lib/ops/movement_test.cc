// Inference and validation of the data-movement ops (lib/ops/movement.cc).
#include <gtest/gtest.h>

#include <limits>
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

TEST(MovementOpsTest, Transpose) {
  Node n = MakeNode("Transpose", 1, 1, Attrs({{"perm", Attribute::Ints({0, 2, 3, 1})}}));
  EXPECT_TRUE(ShapeIs(Infer(n, 13, {Sh({kBatch, 3, 4, 5})}), {kBatch, 4, 5, 3}));
  Node rev = MakeNode("Transpose", 1, 1);
  EXPECT_TRUE(ShapeIs(Infer(rev, 13, {Sh({2, 3, 4})}), {4, 3, 2}));
  EXPECT_TRUE(FailsWith(Infer(n, 13, {Sh({2, 3})}).status, "rank 2"));
  Node bad = MakeNode("Transpose", 1, 1, Attrs({{"perm", Attribute::Ints({0, 0, 1})}}));
  EXPECT_TRUE(FailsWith(Validate(bad, 13), "not a permutation"));
  Node big = MakeNode("Transpose", 1, 1, Attrs({{"perm", Attribute::Ints({0, 3})}}));
  EXPECT_TRUE(FailsWith(Validate(big, 13), "not a permutation"));
}

TEST(MovementOpsTest, Concat) {
  Node n = MakeNode("Concat", 3, 1, Attrs({{"axis", Attribute::Int(-1)}}));
  EXPECT_TRUE(ShapeIs(Infer(n, 13, {Sh({kBatch, 2}), Sh({kBatch, 3}), Sh({kBatch, 1})}), {kBatch, 6}));
  Node a0 = MakeNode("Concat", 2, 1, Attrs({{"axis", Attribute::Int(0)}}));
  EXPECT_TRUE(ShapeIs(Infer(a0, 13, {Sh({kBatch, 2}), Sh({3, 2})}), {Dim(), 2}));
  EXPECT_TRUE(FailsWith(Infer(a0, 13, {Sh({2, 2}), Sh({2, 2, 1})}).status, "different ranks"));
  EXPECT_TRUE(FailsWith(Infer(a0, 13, {Sh({2, 2}), Sh({2, 3})}).status, "differs"));
  EXPECT_TRUE(FailsWith(Infer(a0, 13, {Sh({2}), Sh({2}, DType::kInt64)}).status, "int64"));
  Node axis2 = MakeNode("Concat", 2, 1, Attrs({{"axis", Attribute::Int(2)}}));
  EXPECT_TRUE(FailsWith(Infer(axis2, 13, {Sh({2, 2}), Sh({2, 2})}).status, "out of range"));
  EXPECT_TRUE(FailsWith(Validate(MakeNode("Concat", 2, 1), 13), "axis"));
}

TEST(MovementOpsTest, Split) {
  Node attr = MakeNode("Split", 1, 2, Attrs({{"axis", Attribute::Int(1)}, {"split", Attribute::Ints({2, 4})}}));
  Inferred r = Infer(attr, 11, {Sh({kBatch, 6})});
  EXPECT_TRUE(ShapeIs(r, {kBatch, 2}, 0));
  EXPECT_TRUE(ShapeIs(r, {kBatch, 4}, 1));
  Node input = MakeNode("Split", 2, 3);
  Tensor s = I64({1, 0, 3});
  r = Infer(input, 13, {Sh({4}), Val(s)});
  EXPECT_TRUE(ShapeIs(r, {0}, 1));
  EXPECT_TRUE(ShapeIs(r, {3}, 2));
  Node equal = MakeNode("Split", 1, 3);
  EXPECT_TRUE(ShapeIs(Infer(equal, 13, {Sh({6, 2})}), {2, 2}, 2));
  EXPECT_TRUE(FailsWith(Infer(equal, 13, {Sh({7, 2})}).status, "equal parts"));
  Tensor bad_sum = I64({1, 1, 1});
  EXPECT_TRUE(FailsWith(Infer(input, 13, {Sh({4}), Val(bad_sum)}).status, "sums to 3"));
  Tensor bad_len = I64({2, 2});
  EXPECT_TRUE(FailsWith(Infer(input, 13, {Sh({4}), Val(bad_len)}).status, "3 outputs"));
  EXPECT_TRUE(FailsWith(Validate(attr, 13), "opset 13"));
}

TEST(MovementOpsTest, Slice) {
  Node n = MakeNode("Slice", 5, 1);
  Tensor starts = I64({20, 10, 4}), ends = I64({0, 0, 1}), axes = I64({0, 1, 2}), steps = I64({-1, -3, -2});
  // The ONNX test_slice_neg_steps case: [20,10,5] -> [19,3,2].
  EXPECT_TRUE(ShapeIs(Infer(n, 13, {Sh({20, 10, 5}), Val(starts), Val(ends), Val(axes), Val(steps)}), {19, 3, 2}));
  Tensor s1 = I64({0}), e1 = I64({std::numeric_limits<int64_t>::max()}), a1 = I64({1}), st1 = I64({1});
  EXPECT_TRUE(ShapeIs(Infer(n, 13, {Sh({kBatch, kBatch}), Val(s1), Val(e1), Val(a1), Val(st1)}), {kBatch, kBatch}));
  Tensor rs = I64({-1}), re = I64({std::numeric_limits<int64_t>::min()}), rstep = I64({-1});
  EXPECT_TRUE(ShapeIs(Infer(n, 13, {Sh({kBatch, 2}), Val(rs), Val(re), Val(a1), Val(rstep)}), {kBatch, 2}));
  EXPECT_TRUE(ShapeIs(Infer(n, 13, {Sh({3, kBatch}), Val(rs), Val(re), Val(a1), Val(rstep)}), {3, kBatch}));
  Tensor a0 = I64({0});
  Tensor e2 = I64({2});
  EXPECT_TRUE(ShapeIs(Infer(n, 13, {Sh({kBatch, 3}), Val(s1), Val(e2), Val(a0), Val(st1)}), {Dim(), 3}));
  // Starts not known yet: only the sliced axes become unknown.
  EXPECT_TRUE(ShapeIs(Infer(n, 13, {Sh({4, 3}), Sh({1}, DType::kInt64), Val(e2), Val(a1), Absent()}), {4, Dim()}));
  Node three = MakeNode("Slice", 3, 1);
  Tensor s3 = I64({-3, 1}), e3 = I64({-1, 1000});
  EXPECT_TRUE(ShapeIs(Infer(three, 13, {Sh({5, 4}), Val(s3), Val(e3)}), {2, 3}));
  Tensor big = I64({std::numeric_limits<int64_t>::max()});
  EXPECT_TRUE(ShapeIs(Infer(n, 13, {Sh({5, 3}), Val(s1), Val(big), Val(a0), Val(big)}), {1, 3}));
  Tensor huge_pads = I64({std::numeric_limits<int64_t>::max(), 1});
  EXPECT_TRUE(FailsWith(Infer(MakeNode("Pad", 2, 1), 13, {Sh({4}), Val(huge_pads)}).status, "overflow"));
  Tensor zero = I64({0});
  EXPECT_TRUE(FailsWith(Infer(n, 13, {Sh({4}), Val(s1), Val(e2), Val(a0), Val(zero)}).status, "0"));
  Tensor dup = I64({0, -2});
  Tensor s2 = I64({0, 0});
  EXPECT_TRUE(FailsWith(Infer(n, 13, {Sh({4, 4}), Val(s2), Val(s2), Val(dup), Absent()}).status, "repeated"));
  Node old = MakeNode("Slice", 1, 1, Attrs({{"starts", Attribute::Ints({1})}, {"ends", Attribute::Ints({-1})}}));
  EXPECT_TRUE(Validate(old, 9).ok());
  EXPECT_TRUE(ShapeIs(Infer(old, 9, {Sh({5, 2})}), {3, 2}));
  EXPECT_TRUE(FailsWith(Validate(old, 10), "opset 10"));
}

TEST(MovementOpsTest, Gather) {
  Node n = MakeNode("Gather", 2, 1, Attrs({{"axis", Attribute::Int(1)}}));
  EXPECT_TRUE(ShapeIs(Infer(n, 13, {Sh({kBatch, 3, 4}), Sh({1, 2}, DType::kInt64)}), {kBatch, 1, 2, 4}));
  EXPECT_TRUE(ShapeIs(Infer(n, 13, {Sh({3, 3}), Sh({}, DType::kInt32)}), {3}));
  EXPECT_TRUE(FailsWith(Infer(n, 13, {Sh({3, 3}), Sh({2}, DType::kFloat32)}).status, "int32 or int64"));
  EXPECT_TRUE(FailsWith(Infer(n, 13, {Sh({3}), Sh({2}, DType::kInt64)}).status, "out of range"));
}

TEST(MovementOpsTest, Expand) {
  Node n = MakeNode("Expand", 2, 1);
  Tensor s = I64({2, 1, 4});
  EXPECT_TRUE(ShapeIs(Infer(n, 13, {Sh({3, 1}), Val(s)}), {2, 3, 4}));
  EXPECT_TRUE(ShapeIs(Infer(n, 13, {Sh({kBatch, 1}), Val(s)}), {2, kBatch, 4}));
  Tensor bad = I64({2, 3});
  EXPECT_TRUE(FailsWith(Infer(n, 13, {Sh({4}), Val(bad)}).status, "broadcast"));
}

TEST(MovementOpsTest, Pad) {
  Node n = MakeNode("Pad", 2, 1, Attrs({{"mode", Attribute::String("reflect")}}));
  Tensor pads = I64({0, 1, 0, 2});
  EXPECT_TRUE(ShapeIs(Infer(n, 13, {Sh({kBatch, 4}), Val(pads)}), {kBatch, 7}));
  Tensor crop = I64({-1, 0, -1, 0});
  EXPECT_TRUE(ShapeIs(Infer(n, 13, {Sh({4, 4}), Val(crop)}), {2, 4}));
  Tensor too_much = I64({-3, 0, -3, 0});
  EXPECT_TRUE(FailsWith(Infer(n, 13, {Sh({4, 4}), Val(too_much)}).status, "remove more"));
  Tensor short_pads = I64({1, 1});
  EXPECT_TRUE(FailsWith(Infer(n, 13, {Sh({4, 4}), Val(short_pads)}).status, "2 * rank"));
  Tensor pad_empty = I64({1, 1});
  EXPECT_TRUE(FailsWith(Infer(n, 13, {Sh({0}), Val(pad_empty)}).status, "size 0"));
  Node wrap = MakeNode("Pad", 2, 1, Attrs({{"mode", Attribute::String("wrap")}}));
  EXPECT_TRUE(FailsWith(Validate(wrap, 13), "wrap"));
  Node old = MakeNode("Pad", 1, 1, Attrs({{"pads", Attribute::Ints({1, 2})}, {"value", Attribute::Float(1.f)}}));
  EXPECT_TRUE(Validate(old, 10).ok());
  EXPECT_TRUE(ShapeIs(Infer(old, 10, {Sh({3})}), {6}));
  EXPECT_TRUE(FailsWith(Validate(old, 11), "opset 11"));
}

TEST(MovementOpsTest, TileAndRange) {
  Node t = MakeNode("Tile", 2, 1);
  Tensor reps = I64({2, 1});
  EXPECT_TRUE(ShapeIs(Infer(t, 13, {Sh({3, kBatch}), Val(reps)}), {6, kBatch}));
  Tensor bad = I64({2});
  EXPECT_TRUE(FailsWith(Infer(t, 13, {Sh({3, 3}), Val(bad)}).status, "one entry per input dim"));
  Node r = MakeNode("Range", 3, 1);
  Tensor s = Tensor::Scalar<float>(1.f), l = Tensor::Scalar<float>(5.f), d = Tensor::Scalar<float>(2.f);
  EXPECT_TRUE(ShapeIs(Infer(r, 11, {Val(s), Val(l), Val(d)}), {2}));
  Tensor si = Tensor::Scalar<int32_t>(10), li = Tensor::Scalar<int32_t>(6), di = Tensor::Scalar<int32_t>(-3);
  EXPECT_TRUE(ShapeIs(Infer(r, 11, {Val(si), Val(li), Val(di)}), {2}));
  EXPECT_TRUE(ShapeIs(Infer(r, 11, {Sh({}), Sh({}), Sh({})}), {Dim()}));
  Tensor d0 = Tensor::Scalar<int32_t>(0);
  EXPECT_TRUE(FailsWith(Infer(r, 11, {Val(si), Val(li), Val(d0)}).status, "delta"));
}

}  // namespace
}  // namespace whittle
