// The search's space and its configurations (passes/search/search_space.h) on the bundled MLP and
// CNN: the layers and choices offered per family, a configuration applied as per-layer pass
// options touching exactly the chosen layers, and the scorer's metrics (passes/search/metric.h).
#include "passes/search/search_space.h"

#include <gtest/gtest.h>

#include "lib/data/dataset.h"
#include "lib/onnx/model_io.h"
#include "lib/ops/op_def.h"
#include "passes/cost.h"
#include "passes/search/metric.h"
#include "tests/util/graph_builder.h"
#include "tests/util/test_util.h"

namespace whittle::search {
namespace {

Graph Load(const std::string& name) {
  auto g = LoadModel(std::string(WHITTLE_SOURCE_DIR) + "/models/" + name + ".onnx");
  EXPECT_TRUE(g.ok()) << g.status().message();
  EXPECT_TRUE(InferShapes(*g).ok());
  return std::move(g).value();
}

int Find(const SearchSpace& s, size_t layer, const std::string& key) {
  for (size_t j = 0; j < s.choices[layer].size(); ++j)
    if (s.choices[layer][j].Key() == key) return static_cast<int>(j);
  ADD_FAILURE() << "no choice " << key << " for " << s.layers[layer].node;
  return 0;
}

TEST(SearchSpace, LayersAndChoicesFollowTheFamilies) {
  const Graph cnn = Load("cnn");
  auto s = MakeSearchSpace(cnn, {"int8", "int4", "svd"});
  ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_EQ(s->layers.size(), 4u);
  EXPECT_EQ(s->layers[0].node, "/conv1/Conv");
  EXPECT_FALSE(s->layers[0].gemm_like);
  EXPECT_TRUE(s->layers[2].gemm_like);
  EXPECT_EQ(s->layers[2].full_rank, 128);
  // conv1 (16 filters of 9): full rank 9, too small to factorize; int4 is for Gemm/MatMul only.
  EXPECT_EQ(s->choices[0].size(), 3u);  // float, int8, int8 weights only
  EXPECT_EQ(s->choices[0][0].Key(), "float");
  EXPECT_TRUE(s->choices[0][0].identity());
  // fc1: {none, svd0.5, svd0.25} x {float, int8, int8 weight-only, int4}.
  EXPECT_EQ(s->choices[2].size(), 12u);
  Find(*s, 2, "int8w");
  Find(*s, 2, "svd0.25+int4");

  EXPECT_FALSE(ParseFamilies("int8,bogus").ok());
  EXPECT_FALSE(ParseFamilies("").ok());
  auto f = ParseFamilies("prune,cluster");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->size(), 2u);
}

TEST(SearchSpace, AConfigurationTouchesExactlyTheChosenLayers) {
  const Graph mlp = Load("mlp");
  auto calib = LoadDataset("fashion-mnist:train", 64);
  ASSERT_TRUE(calib.ok()) << calib.status().message();
  auto s = MakeSearchSpace(mlp, {"int8", "svd", "cluster", "prune"});
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s->layers.size(), 3u);
  PassContext ctx;
  ctx.calibration = &*calib;
  Config c(3, 0);
  c[0] = Find(*s, 0, "prune0.5");
  c[1] = Find(*s, 1, "svd0.25+k16");
  c[2] = Find(*s, 2, "int8");
  std::vector<PassReport> reports;
  auto g = ApplyConfig(mlp, *s, c, {}, ctx, &reports);
  ASSERT_TRUE(g.ok()) << g.status().message();
  ASSERT_EQ(reports.size(), 4u);  // prune, svd, int8, cluster
  EXPECT_EQ(reports[0].pass, "prune");
  // fc1 lost half its units (and fc2 its matching inputs); fc2 became two codebook factors; only
  // fc3 is quantized.
  EXPECT_EQ(::whittle::testing::CountOps(*g, "CodebookMatMul"), 2);
  EXPECT_EQ(::whittle::testing::CountOps(*g, "DequantizeLinear") > 0, true);
  int fc1_gemm = 0;
  for (const Node& n : g->nodes()) {
    if (n.name == "/fc1/Gemm") {
      ++fc1_gemm;
      EXPECT_EQ(n.op_type, "Gemm");
      EXPECT_EQ(g->ConstInput(n, 1)->dim(0), 128);  // 256 units, half pruned
    }
    if (n.op_type == "QuantizeLinear") {
      EXPECT_EQ(n.name.find("/fc1/"), std::string::npos) << n.name;
    }
  }
  EXPECT_EQ(fc1_gemm, 1);
  EXPECT_LT(ComputeCost(*g).param_bytes, ComputeCost(mlp).param_bytes / 2);  // fc1, half its units, dominates
  EXPECT_EQ(DescribeConfig(*s, c), "/fc1/Gemm: prune0.5, /fc2/Gemm: svd0.25+k16, /fc3/Gemm: int8");
  EXPECT_EQ(DescribeConfig(*s, Config(3, 0)), "float (nothing compressed)");

  // The identity configuration is the model itself.
  auto same = ApplyConfig(mlp, *s, Config(3, 0), {}, ctx);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->nodes().size(), mlp.nodes().size());
  // A bad base spec is an error naming the pass.
  auto bad = ApplyConfig(mlp, *s, c, {{"int8", "calibration=nope"}}, ctx);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("int8"), std::string::npos) << bad.status().message();
}

TEST(SearchMetric, TheOriginalScoresItsBaselineAndAChangeDrops) {
  const Graph mlp = Load("mlp");
  auto data = LoadDataset("fashion-mnist:test", 200);
  ASSERT_TRUE(data.ok());
  auto s = MakeSearchSpace(mlp, {"int4"});
  ASSERT_TRUE(s.ok());
  PassContext ctx;
  Config c(3, 0);
  c[0] = Find(*s, 0, "int4");
  auto q = ApplyConfig(mlp, *s, c, {{"int4", "block=128"}}, ctx);
  ASSERT_TRUE(q.ok()) << q.status().message();
  for (MetricKind k :
       {MetricKind::kTop1, MetricKind::kAgreement, MetricKind::kSequence, MetricKind::kCosine, MetricKind::kMse}) {
    auto scorer = Scorer::Make(mlp, *data, k, 1);
    ASSERT_TRUE(scorer.ok()) << MetricName(k) << ": " << scorer.status().message();
    auto self = scorer->Measure(mlp);
    ASSERT_TRUE(self.ok());
    EXPECT_NEAR(self->value, scorer->baseline(), 1e-9) << MetricName(k);
    EXPECT_EQ(self->flips, 0) << MetricName(k);
    auto other = scorer->Measure(*q);
    ASSERT_TRUE(other.ok()) << other.status().message();
    if (k == MetricKind::kCosine || k == MetricKind::kMse) {
      EXPECT_DOUBLE_EQ(scorer->baseline(), 100);
      EXPECT_LT(other->value, 100) << MetricName(k);
      EXPECT_GT(other->value, 90) << MetricName(k);
    }
    if (k == MetricKind::kAgreement || k == MetricKind::kSequence) {  // one position per sample here
      EXPECT_NEAR(other->value, 100 - other->flips, 1e-9);
    }
  }
  auto unlabelled = *data;
  unlabelled.labels = Tensor();
  EXPECT_FALSE(Scorer::Make(mlp, unlabelled, MetricKind::kTop1, 1).ok());
  EXPECT_FALSE(ParseMetric("accuracy").ok());
  EXPECT_EQ(ParseMetric("top1-agreement")->kind, MetricKind::kAgreement);
  auto ctc = ParseMetric("top1-ctc:ignore=6624,5,5");
  ASSERT_TRUE(ctc.ok()) << ctc.status().message();
  EXPECT_EQ(ctc->ignore, (std::vector<int64_t>{5, 6624}));
  EXPECT_EQ(ctc->Name(), "top1-ctc:ignore=5,6624");
  for (const char* bad : {"top1-ctc:ignore=", "top1-ctc:ignore=0", "top1-ctc:ignore=4x", "top1:ignore=3",
                          "top1-ctc:skip=3", "top1-ctc:ignore=3,,4"})
    EXPECT_FALSE(ParseMetric(bad).ok()) << bad;
}

}  // namespace
}  // namespace whittle::search

namespace whittle::search {
namespace {

// The search quantizes the original model once per layer: the activation ranges are measured on
// the first run and taken from the cache afterwards, giving the same model.
TEST(SearchSpace, Int8RangesAreMeasuredOnceAndReused) {
  const Graph mlp = Load("mlp");
  auto calib = LoadDataset("fashion-mnist:train", 64);
  ASSERT_TRUE(calib.ok());
  auto s = MakeSearchSpace(mlp, {"int8", "svd"});
  ASSERT_TRUE(s.ok());
  int calibrations = 0;
  PassContext ctx;
  ctx.calibration = &*calib;
  ctx.calibration_cache = std::make_shared<CalibrationCache>();
  ctx.progress = [&](const std::string& stage, int64_t, int64_t) { calibrations += stage.find("calibration") != std::string::npos; };
  Config c(3, 0);
  c[0] = Find(*s, 0, "int8");
  auto first = ApplyConfig(mlp, *s, c, {}, ctx);
  ASSERT_TRUE(first.ok()) << first.status().message();
  const int after_first = calibrations;
  EXPECT_GT(after_first, 0);
  EXPECT_FALSE(ctx.calibration_cache->ranges.empty());
  auto again = ApplyConfig(mlp, *s, c, {}, ctx);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(calibrations, after_first);  // nothing measured again
  ASSERT_EQ(first->nodes().size(), again->nodes().size());
  for (const Node& n : first->nodes()) {
    if (n.op_type != "QuantizeLinear") continue;
    const Tensor* a = first->ConstInput(n, 1);
    int id = again->FindValue(first->value(n.inputs[1]).name);
    ASSERT_GE(id, 0);
    ASSERT_TRUE(a && again->value(id).initializer);
    EXPECT_EQ(a->data<float>()[0], again->value(id).initializer->data<float>()[0]) << n.name;
  }
  // A structural change before the int8 pass changes the activations: measured afresh.
  c[0] = Find(*s, 0, "svd0.25+int8");
  ASSERT_TRUE(ApplyConfig(mlp, *s, c, {}, ctx).ok());
  EXPECT_GT(calibrations, after_first);
}

// top1-sequence counts a sample as kept only when every position's top-1 is the original's.
TEST(SearchMetric, SequenceCountsWholeSamples) {
  // y[n, t, c] = x[n, t, c] * w: a scale on the class axis decides which class wins per position.
  testing::GraphBuilder b;
  Tensor w = testing::RandomFloat({4, 4}, 5, 0.5f, 1.5f);
  b.Input("x", DType::kFloat32, {Dim::Symbol("n"), 3, 4}).Init("w", w).Op("MatMul", {"x", "w"}, {"y"}).Output("y");
  Graph g = b.Build();
  ASSERT_TRUE(InferShapes(g).ok());
  Dataset d;
  d.inputs = testing::RandomFloat({50, 3, 4}, 9);
  auto seq = Scorer::Make(g, d, MetricKind::kSequence, 1);
  auto pos = Scorer::Make(g, d, MetricKind::kAgreement, 1);
  auto ctc = Scorer::Make(g, d, MetricKind::kCtc, 1);
  ASSERT_TRUE(seq.ok() && pos.ok() && ctc.ok());
  Graph h = g;
  for (Value& v : h.values())
    if (v.name == "w") {
      Tensor t = testing::RandomFloat({4, 4}, 6, 0.5f, 1.5f);
      v.initializer = t;
    }
  auto a = seq->Measure(h), p = pos->Measure(h);
  ASSERT_TRUE(a.ok() && p.ok());
  EXPECT_LT(a->value, 100);
  // A sample fails if any of its 3 positions flips: the sequence score is at most the positions'.
  EXPECT_LE(a->value, p->value + 1e-9);
  EXPECT_NEAR(p->flips, a->flips, 1e-9);  // flips count positions in both
  // A path that changed may still decode to the same line (e.g. [1, 1, 0] and [1, 0, 0] both read
  // "1"): the decoded lines agree at least as often as the paths do.
  auto c = ctc->Measure(h);
  ASSERT_TRUE(c.ok());
  EXPECT_GE(c->value, a->value - 1e-9);
  EXPECT_DOUBLE_EQ(ctc->Measure(g)->value, 100);
}

// top1-ctc:ignore=C drops class C from both decoded lines: a candidate that reads C where the
// original read the blank reads the same lines once C is ignored, and other lines without it.
TEST(SearchMetric, CtcIgnoresTheNamedClasses) {
  // y[n, t, :] = x[n, t, :] * P, P swapping classes 0 (blank) and 3.
  std::vector<float> eye(16, 0.f), swap(16, 0.f);
  for (int i = 0; i < 4; ++i) eye[i * 4 + i] = 1;
  swap[0 * 4 + 3] = swap[3 * 4 + 0] = swap[1 * 4 + 1] = swap[2 * 4 + 2] = 1;
  testing::GraphBuilder b;
  b.Input("x", DType::kFloat32, {Dim::Symbol("n"), 6, 4})
      .Init("w", Tensor::FromVector<float>({4, 4}, eye))
      .Op("MatMul", {"x", "w"}, {"y"})
      .Output("y");
  Graph g = b.Build();
  ASSERT_TRUE(InferShapes(g).ok());
  Dataset d;
  std::vector<float> x(40 * 6 * 4, 0.f);
  uint32_t r = 7;
  bool any_blank = false;
  for (int p = 0; p < 40 * 6; ++p) {  // one-hot positions over the blank, 1 and 2; never 3
    r = r * 1664525u + 1013904223u;
    const int c = static_cast<int>((r >> 16) % 3);
    any_blank |= c == 0;
    x[static_cast<size_t>(p * 4 + c)] = 1;
  }
  ASSERT_TRUE(any_blank);
  d.inputs = Tensor::FromVector<float>({40, 6, 4}, x);
  Graph h = g;
  for (Value& v : h.values())
    if (v.name == "w") v.initializer = Tensor::FromVector<float>({4, 4}, swap);
  auto plain = Scorer::Make(g, d, *ParseMetric("top1-ctc"), 1);
  auto ignoring = Scorer::Make(g, d, *ParseMetric("top1-ctc:ignore=3"), 1);
  ASSERT_TRUE(plain.ok() && ignoring.ok());
  auto a = plain->Measure(h), b2 = ignoring->Measure(h);
  ASSERT_TRUE(a.ok() && b2.ok());
  EXPECT_LT(a->value, 50);  // most lines hold a blank between characters
  EXPECT_DOUBLE_EQ(b2->value, 100);
  EXPECT_GT(b2->flips, 0);  // the positions did change
}

}  // namespace
}  // namespace whittle::search
