// criterion=reconstruction: channels whose removal the consumers can make up for go first, and
// the consumers are re-fitted by least squares on the calibration data.
#include <gtest/gtest.h>

#include <cmath>

#include "lib/data/dataset.h"
#include "passes/pass_manager.h"
#include "tests/passes/pass_test_util.h"
#include "tests/util/graph_builder.h"
#include "tests/util/test_util.h"
#include "whittle/session.h"

namespace whittle {
namespace {

using testing::GraphBuilder;
using testing::RandomFloat;

// x[N,8] -> Gemm(16 hidden) -> Relu -> Gemm(4). Hidden units 8..15 are copies of 0..7 scaled by
// 0.9 (ReLU keeps the ratio), so half the width is redundant: dropping it and re-fitting the
// consumer loses nothing, while dropping by weight norm without re-fitting loses their share.
Graph Redundant() {
  Tensor w1 = RandomFloat({16, 8}, 1), b1 = RandomFloat({16}, 2, 0.1f, 0.5f);
  for (int64_t u = 8; u < 16; ++u) {
    for (int64_t i = 0; i < 8; ++i) w1.data<float>()[u * 8 + i] = 0.9f * w1.data<float>()[(u - 8) * 8 + i];
    b1.data<float>()[u] = 0.9f * b1.data<float>()[u - 8];
  }
  AttributeMap tb;
  tb.Set("transB", Attribute::Int(1));
  Graph g = GraphBuilder(13)
                .Input("x", DType::kFloat32, {Dim::Symbol("N"), 8})
                .Init("w1", w1)
                .Init("b1", b1)
                .Init("w2", RandomFloat({4, 16}, 3))
                .Init("b2", RandomFloat({4}, 4))
                .Op("Gemm", {"x", "w1", "b1"}, {"h"}, tb)
                .Op("Relu", {"h"}, {"r"})
                .Op("Gemm", {"r", "w2", "b2"}, {"y"}, tb)
                .Output("y")
                .Build();
  g.nodes()[0].name = "fc1";
  g.nodes()[2].name = "fc2";
  WH_CHECK(InferShapes(g).ok());
  return g;
}


TEST(PruneReconstruction, RemovesRedundantUnitsAndRefitsTheConsumer) {
  const Graph original = Redundant();
  auto calib = MakeDataset(RandomFloat({256, 8}, 7), Tensor(), "random");
  ASSERT_TRUE(calib.ok());
  PassContext ctx;
  ctx.calibration = &*calib;
  const Tensor x = RandomFloat({64, 8}, 8);

  Graph rec = original;
  auto r = testing::RunPass(rec, "prune", "ratio=0.5,round=1,criterion=reconstruction", ctx);
  ASSERT_TRUE(r.ok()) << r.status().message();
  Graph l1 = original;
  ASSERT_TRUE(testing::RunPass(l1, "prune", "ratio=0.5,round=1,criterion=l1", ctx).ok());

  const double mse_rec = testing::OutputMse(original, rec, "x", x), mse_l1 = testing::OutputMse(original, l1, "x", x);
  EXPECT_LT(mse_rec, 1e-6) << "the removed half is exactly recoverable";
  EXPECT_GT(mse_l1, 100 * mse_rec + 1e-4) << "l1 " << mse_l1 << " vs reconstruction " << mse_rec;
  // The consumer was re-fitted: its kept columns are no longer the original ones.
  const Tensor& w2 = *rec.value(rec.FindValue("w2")).initializer;
  ASSERT_EQ(w2.dims(), (Dims{4, 8}));
  bool changed = false;
  const Tensor& w2_orig = *original.value(original.FindValue("w2")).initializer;
  for (int64_t o = 0; o < 4; ++o)
    for (int64_t i = 0; i < 8; ++i) changed |= std::fabs(w2.data<float>()[o * 8 + i] - w2_orig.data<float>()[o * 16 + i]) > 1e-3f;
  EXPECT_TRUE(changed);
  bool noted = false;
  for (const std::string& n : r->notes) noted |= n.find("1 consumer(s) re-fitted") != std::string::npos;
  EXPECT_TRUE(noted);
}

TEST(PruneReconstruction, NeedsCalibrationData) {
  Graph g = Redundant();
  auto r = testing::RunPass(g, "prune", "ratio=0.5,criterion=reconstruction");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("criterion=reconstruction needs calibration samples"), std::string::npos)
      << r.status().message();
}

}  // namespace
}  // namespace whittle
