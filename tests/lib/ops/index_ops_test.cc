// Inference and validation of the indexing ops (lib/ops/index_ops.cc).
#include <gtest/gtest.h>

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

constexpr DType kI64 = DType::kInt64;

TEST(IndexOpsTest, SizeAndEyeLike) {
  Inferred s = Infer(MakeNode("Size", 1, 1), 13, {Sh({kBatch, 3})});
  EXPECT_TRUE(ShapeIs(s, {}));
  EXPECT_EQ(s.dtypes[0], kI64);
  Inferred e = Infer(MakeNode("EyeLike", 1, 1, Attrs({{"dtype", Attribute::Int(11)}})), 9, {Sh({2, 3}, kI64)});
  EXPECT_TRUE(ShapeIs(e, {2, 3}));
  EXPECT_EQ(e.dtypes[0], DType::kFloat64);
  EXPECT_TRUE(FailsWith(Infer(MakeNode("EyeLike", 1, 1), 9, {Sh({2, 3, 4})}).status, "2-D"));
}

TEST(IndexOpsTest, GatherElementsAndScatter) {
  Node g = MakeNode("GatherElements", 2, 1, Attrs({{"axis", Attribute::Int(1)}}));
  EXPECT_TRUE(ShapeIs(Infer(g, 13, {Sh({kBatch, 5}), Sh({kBatch, 2}, kI64)}), {kBatch, 2}));
  EXPECT_TRUE(FailsWith(Infer(g, 13, {Sh({3, 5}), Sh({3}, kI64)}).status, "same rank"));
  Node g3 = MakeNode("GatherElements", 2, 1, Attrs({{"axis", Attribute::Int(2)}}));
  EXPECT_TRUE(FailsWith(Infer(g3, 13, {Sh({3, 5}), Sh({3, 5}, kI64)}).status, "out of range"));
  Node se = MakeNode("ScatterElements", 3, 1, Attrs({{"reduction", Attribute::String("add")}}));
  EXPECT_TRUE(ShapeIs(Infer(se, 16, {Sh({4, 4}), Sh({1, 4}, kI64), Sh({1, 4})}), {4, 4}));
  EXPECT_TRUE(FailsWith(Validate(se, 13), "opset 16"));
  Node bad = MakeNode("ScatterND", 3, 1, Attrs({{"reduction", Attribute::String("max")}}));
  EXPECT_TRUE(FailsWith(Validate(bad, 16), "none, add or mul"));
  Node nd = MakeNode("ScatterND", 3, 1);
  EXPECT_TRUE(FailsWith(Infer(nd, 16, {Sh({4}), Sh({1, 2}, kI64), Sh({1})}).status, "last dim"));
}

TEST(IndexOpsTest, TriluCumSumOneHot) {
  EXPECT_TRUE(ShapeIs(Infer(MakeNode("Trilu", 1, 1), 14, {Sh({kBatch, 3, 4})}), {kBatch, 3, 4}));
  EXPECT_TRUE(FailsWith(Infer(MakeNode("Trilu", 1, 1), 14, {Sh({4})}).status, "rank >= 2"));
  Tensor axis = Tensor::Scalar<int64_t>(2);
  EXPECT_TRUE(FailsWith(Infer(MakeNode("CumSum", 2, 1), 14, {Sh({3, 4}), Val(axis)}).status, "out of range"));
  Tensor depth = Tensor::Scalar<float>(10);
  Node oh = MakeNode("OneHot", 3, 1, Attrs({{"axis", Attribute::Int(1)}}));
  Inferred r = Infer(oh, 11, {Sh({kBatch, 3}, kI64), Val(depth), Sh({2}, DType::kInt32)});
  EXPECT_TRUE(ShapeIs(r, {kBatch, 10, 3}));
  EXPECT_EQ(r.dtypes[0], DType::kInt32);
  EXPECT_TRUE(ShapeIs(Infer(oh, 11, {Sh({kBatch, 3}, kI64), Sh({}), Sh({2})}), {kBatch, Dim(), 3}));
  Node oh_bad = MakeNode("OneHot", 3, 1, Attrs({{"axis", Attribute::Int(3)}}));
  EXPECT_TRUE(FailsWith(Infer(oh_bad, 11, {Sh({2, 3}, kI64), Val(depth), Sh({2})}).status, "out of range"));
}

TEST(IndexOpsTest, DepthToSpaceSpaceToDepth) {
  Node d =
      MakeNode("DepthToSpace", 1, 1, Attrs({{"blocksize", Attribute::Int(2)}, {"mode", Attribute::String("CRD")}}));
  EXPECT_TRUE(ShapeIs(Infer(d, 13, {Sh({kBatch, 8, 3, 4})}), {kBatch, 2, 6, 8}));
  EXPECT_TRUE(FailsWith(Infer(d, 13, {Sh({1, 6, 3, 4})}).status, "divisible"));
  Node bad_mode =
      MakeNode("DepthToSpace", 1, 1, Attrs({{"blocksize", Attribute::Int(2)}, {"mode", Attribute::String("XYZ")}}));
  EXPECT_TRUE(FailsWith(Validate(bad_mode, 13), "DCR or CRD"));
  Node s = MakeNode("SpaceToDepth", 1, 1, Attrs({{"blocksize", Attribute::Int(2)}}));
  EXPECT_TRUE(ShapeIs(Infer(s, 13, {Sh({1, 3, 4, 6})}), {1, 12, 2, 3}));
  EXPECT_TRUE(FailsWith(Infer(s, 13, {Sh({1, 3, 5, 6})}).status, "divisible"));
  EXPECT_TRUE(
      FailsWith(Validate(MakeNode("SpaceToDepth", 1, 1, Attrs({{"blocksize", Attribute::Int(0)}})), 13), "blocksize"));
}

TEST(IndexOpsTest, TopK) {
  Tensor k = Tensor::FromVector<int64_t>({1}, {3});
  Node n = MakeNode("TopK", 2, 2, Attrs({{"axis", Attribute::Int(1)}}));
  Inferred r = Infer(n, 11, {Sh({kBatch, 5}), Val(k)});
  EXPECT_TRUE(ShapeIs(r, {kBatch, 3}, 0));
  EXPECT_TRUE(ShapeIs(r, {kBatch, 3}, 1));
  EXPECT_EQ(r.dtypes[1], kI64);
  EXPECT_TRUE(ShapeIs(Infer(n, 11, {Sh({2, 5}), Sh({1}, kI64)}), {2, Dim()}));
  EXPECT_TRUE(FailsWith(Infer(n, 11, {Sh({2, 2}), Val(k)}).status, "k = 3"));
  Node old = MakeNode("TopK", 1, 2, Attrs({{"k", Attribute::Int(2)}}));
  EXPECT_TRUE(ShapeIs(Infer(old, 9, {Sh({4, 5})}), {4, 2}));
  EXPECT_TRUE(FailsWith(Validate(old, 11), "opset 10"));
  Node axis = MakeNode("TopK", 2, 2, Attrs({{"axis", Attribute::Int(-3)}}));
  EXPECT_TRUE(FailsWith(Infer(axis, 11, {Sh({2, 5}), Val(k)}).status, "out of range"));
}

TEST(IndexOpsTest, GatherND) {
  Node n = MakeNode("GatherND", 2, 1);
  EXPECT_TRUE(ShapeIs(Infer(n, 13, {Sh({4, 5, 6}), Sh({kBatch, 2}, kI64)}), {kBatch, 6}));
  Node b = MakeNode("GatherND", 2, 1, Attrs({{"batch_dims", Attribute::Int(1)}}));
  EXPECT_TRUE(ShapeIs(Infer(b, 13, {Sh({2, 5, 6}), Sh({2, 3, 1}, kI64)}), {2, 3, 6}));
  EXPECT_TRUE(FailsWith(Infer(n, 13, {Sh({4, 5}), Sh({1, 3}, kI64)}).status, "does not fit"));
  Node b3 = MakeNode("GatherND", 2, 1, Attrs({{"batch_dims", Attribute::Int(2)}}));
  EXPECT_TRUE(FailsWith(Infer(b3, 13, {Sh({4, 5}), Sh({4, 1}, kI64)}).status, "batch_dims"));
}

}  // namespace
}  // namespace whittle
