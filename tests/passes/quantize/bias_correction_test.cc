// --int8 bias-correction=1: weights whose rounding errs the same way in every element shift the
// layer's mean output; the corrected bias takes that shift back out.
#include <gtest/gtest.h>

#include <cmath>

#include "lib/data/dataset.h"
#include "tests/passes/pass_test_util.h"
#include "tests/util/graph_builder.h"
#include "tests/util/test_util.h"
#include "whittle/session.h"

namespace whittle {
namespace {

using testing::GraphBuilder;

// y = x·Wᵀ + b, W [8, 64]: per row one element of 63 steps (it sets the scale, reduce-range
// qmax 63) and the rest at 10.4 steps, which round down to 10: every output loses 0.4 steps per
// positive input.
Graph Biased() {
  Tensor w(DType::kFloat32, {8, 64});
  for (int64_t o = 0; o < 8; ++o) {
    const float step = 0.01f * static_cast<float>(o + 1);
    for (int64_t i = 0; i < 64; ++i) w.data<float>()[o * 64 + i] = (i == 0 ? 63.f : 10.4f) * step;
  }
  AttributeMap tb;
  tb.Set("transB", Attribute::Int(1));
  Graph g = GraphBuilder(13)
                .Input("x", DType::kFloat32, {Dim::Symbol("N"), 64})
                .Init("w", w)
                .Init("b", testing::RandomFloat({8}, 3))
                .Op("Gemm", {"x", "w", "b"}, {"y"}, tb)
                .Output("y")
                .Build();
  g.nodes()[0].name = "fc";
  WH_CHECK(InferShapes(g).ok());
  return g;
}

// Mean over samples and outputs of (quantized - float).
double MeanSignedError(const Graph& f, const Graph& q, const Tensor& x) {
  auto sf = Session::FromGraph(f);
  auto sq = Session::FromGraph(q);
  WH_CHECK(sf.ok() && sq.ok());
  auto yf = (*sf)->Run({{"x", x}});
  auto yq = (*sq)->Run({{"x", x}});
  WH_CHECK(yf.ok() && yq.ok());
  double s = 0;
  for (int64_t i = 0; i < (*yf)[0].numel(); ++i) s += (*yq)[0].data<float>()[i] - (*yf)[0].data<float>()[i];
  return s / static_cast<double>((*yf)[0].numel());
}

TEST(Int8BiasCorrection, RemovesTheMeanOutputShiftOfWeightRounding) {
  const Graph original = Biased();
  auto calib = MakeDataset(testing::RandomFloat({256, 64}, 1, 0.f, 1.f), Tensor(), "uniform");
  ASSERT_TRUE(calib.ok());
  PassContext ctx;
  ctx.calibration = &*calib;
  Graph plain = original, corrected = original;
  ASSERT_TRUE(testing::RunPass(plain, "int8", "", ctx).ok());
  auto r = testing::RunPass(corrected, "int8", "bias-correction=1", ctx);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->layers.size(), 1u);
  EXPECT_NE(r->layers[0].detail.find("bias corrected"), std::string::npos) << r->layers[0].detail;
  const Tensor test = testing::RandomFloat({256, 64}, 2, 0.f, 1.f);
  const double before = MeanSignedError(original, plain, test), after = MeanSignedError(original, corrected, test);
  EXPECT_LT(before, -0.05) << "the rounding shifts outputs down";
  EXPECT_LT(std::fabs(after), 0.2 * std::fabs(before)) << "before " << before << ", after " << after;
}

TEST(Int8BiasCorrection, NeedsCalibrationDataAndAValidValue) {
  Graph g = Biased();
  auto r = testing::RunPass(g, "int8", "mode=dynamic,bias-correction=1");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("bias-correction=1 needs --calibration-data"), std::string::npos)
      << r.status().message();
  Graph h = Biased();
  EXPECT_FALSE(testing::RunPass(h, "int8", "bias-correction=2").ok());
}

}  // namespace
}  // namespace whittle
