// Inference and validation of the loss ops (lib/ops/loss.cc).
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

TEST(LossOpsTest, NllShapes) {
  Node none = MakeNode("NegativeLogLikelihoodLoss", 2, 1, Attrs({{"reduction", Attribute::String("none")}}));
  EXPECT_TRUE(ShapeIs(Infer(none, 13, {Sh({kBatch, 5, 3}), Sh({kBatch, 3}, DType::kInt64)}), {kBatch, 3}));
  Node mean = MakeNode("NegativeLogLikelihoodLoss", 3, 1);
  EXPECT_TRUE(ShapeIs(Infer(mean, 13, {Sh({2, 5}), Sh({2}, DType::kInt64), Sh({5})}), {}));
  EXPECT_TRUE(FailsWith(Infer(mean, 13, {Sh({2, 5}), Sh({2, 1}, DType::kInt64), Sh({5})}).status, "rank"));
  EXPECT_TRUE(FailsWith(Infer(none, 13, {Sh({2, 5, 3}), Sh({2, 4}, DType::kInt64)}).status, "does not match"));
  EXPECT_TRUE(FailsWith(Infer(none, 13, {Sh({2, 5}), Sh({2})}).status, "int32 or int64"));
  Node bad = MakeNode("NegativeLogLikelihoodLoss", 2, 1, Attrs({{"reduction", Attribute::String("avg")}}));
  EXPECT_TRUE(FailsWith(Validate(bad, 13), "none, sum or mean"));
}

TEST(LossOpsTest, SoftmaxCrossEntropyLogProbOutput) {
  Node n = MakeNode("SoftmaxCrossEntropyLoss", 2, 2, Attrs({{"ignore_index", Attribute::Int(-1)}}));
  Inferred r = Infer(n, 13, {Sh({kBatch, 4, 2}), Sh({kBatch, 2}, DType::kInt64)});
  EXPECT_TRUE(ShapeIs(r, {}, 0));
  EXPECT_TRUE(ShapeIs(r, {kBatch, 4, 2}, 1));
  EXPECT_TRUE(FailsWith(Infer(n, 13, {Sh({4}), Sh({4}, DType::kInt64)}).status, "[N, C, ...]"));
}

}  // namespace
}  // namespace whittle
