// Cross-layer equalization: the float function is unchanged, and a depthwise conv whose channels
// have very different ranges quantizes per tensor far better afterwards.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "lib/data/dataset.h"
#include "passes/quantize/equalize.h"
#include "tests/passes/pass_test_util.h"
#include "tests/util/graph_builder.h"
#include "tests/util/test_util.h"

namespace whittle {
namespace {

using testing::GraphBuilder;

// x[N,8,6,6] -> depthwise 3x3 (channel c scaled by 10^(c/2 - 2)) -> Relu -> 1x1 conv 8->4.
Graph DepthwisePointwise() {
  Tensor dw = testing::RandomFloat({8, 1, 3, 3}, 1);
  Tensor pw = testing::RandomFloat({4, 8, 1, 1}, 2);
  for (int64_t c = 0; c < 8; ++c) {
    const float scale = std::pow(10.f, static_cast<float>(c) / 2.f - 2.f);
    for (int64_t k = 0; k < 9; ++k) dw.data<float>()[c * 9 + k] *= scale;
    for (int64_t o = 0; o < 4; ++o) pw.data<float>()[o * 8 + c] /= scale;  // the net function stays moderate
  }
  AttributeMap d;
  d.Set("group", Attribute::Int(8));
  d.Set("pads", Attribute::Ints({1, 1, 1, 1}));
  Graph g = GraphBuilder(13)
                .Input("x", DType::kFloat32, {Dim::Symbol("N"), 8, 6, 6})
                .Init("dw", dw)
                .Init("db", testing::RandomFloat({8}, 3))
                .Init("pw", pw)
                .Init("pb", testing::RandomFloat({4}, 4))
                .Op("Conv", {"x", "dw", "db"}, {"h"}, d)
                .Op("Relu", {"h"}, {"r"})
                .Op("Conv", {"r", "pw", "pb"}, {"y"})
                .Output("y")
                .Build();
  g.nodes()[0].name = "depthwise";
  g.nodes()[2].name = "pointwise";
  WH_CHECK(InferShapes(g).ok());
  return g;
}

TEST(Int8Equalize, KeepsTheFloatFunction) {
  const Graph original = DepthwisePointwise();
  Graph eq = original;
  const std::vector<std::string> pairs = quant::EqualizeChains(eq);
  ASSERT_EQ(pairs, (std::vector<std::string>{"depthwise -> pointwise"}));
  const Tensor x = testing::RandomFloat({4, 8, 6, 6}, 9);
  EXPECT_LT(testing::OutputMse(original, eq, "x", x), 1e-10);
  // The ranges are now equal channel by channel.
  const Tensor& dw = *eq.value(eq.FindValue("dw")).initializer;
  const Tensor& pw = *eq.value(eq.FindValue("pw")).initializer;
  for (int64_t c = 0; c < 8; ++c) {
    float r1 = 0, r2 = 0;
    for (int64_t k = 0; k < 9; ++k) r1 = std::max(r1, std::fabs(dw.data<float>()[c * 9 + k]));
    for (int64_t o = 0; o < 4; ++o) r2 = std::max(r2, std::fabs(pw.data<float>()[o * 8 + c]));
    EXPECT_NEAR(r1, r2, 1e-4f * r1) << "channel " << c;
  }
}

TEST(Int8Equalize, ReducesPerTensorQuantizationError) {
  const Graph original = DepthwisePointwise();
  auto calib = MakeDataset(testing::RandomFloat({64, 8, 6, 6}, 5), Tensor(), "random");
  ASSERT_TRUE(calib.ok());
  PassContext ctx;
  ctx.calibration = &*calib;
  Graph plain = original, eq = original;
  ASSERT_TRUE(testing::RunPass(plain, "int8", "per-channel=0", ctx).ok());
  auto r = testing::RunPass(eq, "int8", "per-channel=0,equalize=1", ctx);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const Tensor x = testing::RandomFloat({32, 8, 6, 6}, 6);
  const double e_plain = testing::OutputMse(original, plain, "x", x), e_eq = testing::OutputMse(original, eq, "x", x);
  EXPECT_LT(e_eq, 0.25 * e_plain) << "equalized " << e_eq << " vs plain " << e_plain;
}

}  // namespace
}  // namespace whittle
