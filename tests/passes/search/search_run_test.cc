// RunSearch (passes/search/search.h) on a model with two inputs and data without labels: the
// budget is top-1 agreement with the original, the chosen configuration was evaluated for real
// and stays within it, and a zero budget keeps only what changes no prediction.
#include "passes/search/search.h"

#include <gtest/gtest.h>

#include "lib/ops/op_def.h"
#include "passes/cost.h"
#include "tests/util/graph_builder.h"
#include "tests/util/test_util.h"

namespace whittle::search {
namespace {

Graph TwoInputs() {
  testing::GraphBuilder b;
  b.Input("a", DType::kFloat32, {Dim::Symbol("batch"), 64})
      .Input("b", DType::kFloat32, {Dim::Symbol("batch"), 64})
      .Init("W1", testing::RandomFloat({64, 128}, 1, -0.2f, 0.2f))
      .Init("W2", testing::RandomFloat({64, 128}, 2, -0.2f, 0.2f))
      .Init("W3", testing::RandomFloat({128, 10}, 3, -0.3f, 0.3f))
      .Op("MatMul", {"a", "W1"}, {"h1"})
      .Op("MatMul", {"b", "W2"}, {"h2"})
      .Op("Add", {"h1", "h2"}, {"h"})
      .Op("Relu", {"h"}, {"r"})
      .Op("MatMul", {"r", "W3"}, {"y"})
      .Output("y");
  Graph g = b.Build();
  EXPECT_TRUE(InferShapes(g).ok());
  return g;
}

Dataset Data(int64_t n, uint32_t seed) {
  Dataset d;
  d.named = {{"a", testing::RandomFloat({n, 64}, seed)}, {"b", testing::RandomFloat({n, 64}, seed + 1)}};
  d.inputs = d.named[0].second;
  return d;
}

TEST(SearchRun, TwoInputsWithoutLabelsAreScoredByAgreement) {
  const Graph g = TwoInputs();
  const Dataset calib = Data(128, 10), eval = Data(400, 20);
  SearchOptions o;
  o.target = Target::kSize;
  o.max_drop = 3;
  o.families = {"int8", "int4"};
  o.calibration = &calib;
  o.eval = &eval;
  o.max_evals = 6;
  auto r = RunSearch(g, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const SearchReport& s = r->report;
  EXPECT_EQ(s.metric, "top1-agreement");
  EXPECT_DOUBLE_EQ(s.baseline, 100);
  ASSERT_EQ(s.layers.size(), 3u);
  EXPECT_EQ(s.measured, 3 * 3);  // int8, int8 weight-only and int4 for each of the three MatMuls
  int chosen = 0;
  for (const SearchPointReport& p : s.points) {
    if (!p.chosen) continue;
    ++chosen;
    EXPECT_LE(p.drop, 3);
    EXPECT_EQ(p.param_bytes, ComputeCost(r->graph).param_bytes);
  }
  ASSERT_EQ(chosen, 1);
  EXPECT_LT(ComputeCost(r->graph).param_bytes, ComputeCost(g).param_bytes / 3) << SearchText(s);
  EXPECT_FALSE(r->passes.empty());

  // Both inputs still feed the chosen model, which runs on the same data.
  EXPECT_EQ(r->graph.inputs().size(), 2u);
  auto scorer = Scorer::Make(g, eval, MetricKind::kAgreement, 1);
  ASSERT_TRUE(scorer.ok());
  auto score = scorer->Measure(r->graph);
  ASSERT_TRUE(score.ok()) << score.status().message();
  EXPECT_GE(score->value, 97 - 1e-9);

  // A cosine budget of 0 pp can only be met by the original itself.
  o.metric = MetricKind::kCosine;
  o.max_drop = 0;
  auto none = RunSearch(g, o);
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_EQ(none->report.metric, "cosine");
  for (const SearchPointReport& p : none->report.points)
    if (p.chosen) {
      EXPECT_EQ(p.config, "float (nothing compressed)");
    }
  EXPECT_EQ(ComputeCost(none->graph).param_bytes, ComputeCost(g).param_bytes);
}

TEST(SearchRun, MissingDataIsAnError) {
  const Graph g = TwoInputs();
  const Dataset d = Data(16, 1);
  SearchOptions o;
  o.eval = &d;
  auto r = RunSearch(g, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--calibration-data"), std::string::npos);
  o.calibration = &d;
  o.eval = nullptr;
  r = RunSearch(g, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--eval-data"), std::string::npos);
}

}  // namespace
}  // namespace whittle::search
