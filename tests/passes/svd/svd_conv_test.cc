// --svd on Conv: channel (k×k with r filters, then 1×1) and spatial (kh×1 then 1×kw)
// factorization with strides, pads, dilations and auto_pad. The full-rank rewrite must
// reproduce the outputs; a truncated one must equal a plain Conv with the reconstructed weight
// W_r, with ||W - W_r||_F^2 the discarded sigma^2. Grouped convs are skipped with a reason.
#include <gtest/gtest.h>

#include <cmath>

#include "lib/ops/op_def.h"
#include "passes/cost.h"
#include "passes/svd/linalg.h"
#include "passes/svd/low_rank_layer.h"
#include "tests/passes/svd/svd_test_util.h"
#include "tests/util/graph_builder.h"
#include "tests/util/test_util.h"

namespace whittle {
namespace {

using testing::CountOps;
using testing::FindLayer;
using testing::FindNode;
using testing::InitOf;
using testing::RunGraph;
using testing::RunSvd;

struct ConvSpec {
  int64_t cout = 16, cin = 8, kh = 3, kw = 3, h = 11, w = 13;
  Dims strides{1, 1}, pads{}, dilations{1, 1};
  std::string auto_pad;
  int64_t group = 1;
};

Graph ConvGraph(const ConvSpec& s, const Tensor& weight) {
  testing::GraphBuilder b;
  b.Input("x", DType::kFloat32, {Dim::Symbol("batch"), s.cin, s.h, s.w});
  b.Init("W", weight);
  b.Init("B", testing::RandomFloat({s.cout}, 2));
  AttributeMap a;
  a.Set("kernel_shape", Attribute::Ints({s.kh, s.kw}));
  a.Set("strides", Attribute::Ints(s.strides));
  a.Set("dilations", Attribute::Ints(s.dilations));
  if (!s.pads.empty()) a.Set("pads", Attribute::Ints(s.pads));
  if (!s.auto_pad.empty()) a.Set("auto_pad", Attribute::String(s.auto_pad));
  if (s.group != 1) a.Set("group", Attribute::Int(s.group));
  b.Op("Conv", {"x", "W", "B"}, {"y"}, a);
  b.Output("y");
  Graph g = b.Build();
  g.nodes()[0].name = "conv";
  WH_CHECK(InferShapes(g).ok());
  return g;
}

Graph ConvGraph(const ConvSpec& s) { return ConvGraph(s, testing::RandomFloat({s.cout, s.cin / s.group, s.kh, s.kw}, 1)); }

// Replaces the conv by its full-rank factorization through the pass's own building blocks
// (the pass itself would refuse: full rank never saves MACs).
Graph FullRankRewrite(const Graph& g, bool spatial) {
  Graph out = g;
  LowRankLayer l;
  std::string reason;
  WH_CHECK(MatchLowRankLayer(out, 0, spatial, &l, &reason));
  SvdResult svd = FullSvd(LayerMatrix(out, l));
  Matrix a, b;
  SplitFactors(svd, svd.rank(), &a, &b);
  ApplyLowRank(out, l, a, b);
  WH_CHECK(CheckPassOutput(out).ok());
  return out;
}

void ExpectSameOutputs(const Graph& a, const Graph& b, const ConvSpec& s, float tol) {
  const Tensor x = testing::RandomFloat({2, s.cin, s.h, s.w}, 7);
  auto ya = RunGraph(a, {{"x", x}});
  auto yb = RunGraph(b, {{"x", x}});
  ASSERT_TRUE(ya.ok()) << ya.status().message();
  ASSERT_TRUE(yb.ok()) << yb.status().message();
  ASSERT_EQ((*ya)[0].dims(), (*yb)[0].dims());
  EXPECT_LE(testing::MaxAbsDiff((*ya)[0], (*yb)[0]), tol);
}

std::vector<ConvSpec> Geometries() {
  std::vector<ConvSpec> v(5);
  v[1].strides = {2, 1};
  v[1].pads = {1, 0, 1, 2};
  v[2].dilations = {2, 1};
  v[2].pads = {2, 1, 0, 1};
  v[2].kh = 3;
  v[2].kw = 5;
  v[3].auto_pad = "SAME_UPPER";
  v[3].strides = {2, 3};
  v[4].auto_pad = "VALID";
  v[4].strides = {1, 2};
  v[4].dilations = {1, 2};
  return v;
}

TEST(SvdConv, FullRankChannelAndSpatialReproduceOutputs) {
  int i = 0;
  for (const ConvSpec& s : Geometries()) {
    SCOPED_TRACE(::testing::Message() << "geometry " << i++);
    const Graph g = ConvGraph(s);
    for (bool spatial : {false, true}) {
      SCOPED_TRACE(spatial ? "spatial" : "channel");
      const Graph f = FullRankRewrite(g, spatial);
      EXPECT_EQ(CountOps(f, "Conv"), 2);
      const Node* first = FindNode(f, "conv/svd_u");
      ASSERT_NE(first, nullptr);
      const Tensor& u = InitOf(f, *first, 1);
      if (spatial) {
        EXPECT_EQ(u.dims(), (Dims{std::min(s.cin * s.kh, s.cout * s.kw), s.cin, s.kh, 1}));
      } else {
        EXPECT_EQ(u.dims(), (Dims{std::min(s.cout, s.cin * s.kh * s.kw), s.cin, s.kh, s.kw}));
      }
      EXPECT_EQ(FindNode(f, "conv")->inputs.size(), 3u);  // bias on the second conv
      ExpectSameOutputs(g, f, s, 1e-4f);
    }
  }
}

// W_r from the two factor kernels of a factorized conv.
Tensor Reconstruct(const Graph& g, bool spatial, const ConvSpec& s) {
  const Tensor& u = InitOf(g, *FindNode(g, "conv/svd_u"), 1);
  const Tensor& v = InitOf(g, *FindNode(g, "conv"), 1);
  const int64_t r = u.dim(0);
  Tensor w(DType::kFloat32, {s.cout, s.cin, s.kh, s.kw});
  for (int64_t o = 0; o < s.cout; ++o)
    for (int64_t c = 0; c < s.cin; ++c)
      for (int64_t y = 0; y < s.kh; ++y)
        for (int64_t x = 0; x < s.kw; ++x) {
          double acc = 0;
          for (int64_t j = 0; j < r; ++j) {
            if (spatial)  // u [r, cin, kh, 1], v [cout, r, 1, kw]
              acc += static_cast<double>(v.data<float>()[(o * r + j) * s.kw + x]) * u.data<float>()[(j * s.cin + c) * s.kh + y];
            else  // u [r, cin, kh, kw], v [cout, r, 1, 1]
              acc += static_cast<double>(v.data<float>()[o * r + j]) * u.data<float>()[((j * s.cin + c) * s.kh + y) * s.kw + x];
          }
          w.data<float>()[((o * s.cin + c) * s.kh + y) * s.kw + x] = static_cast<float>(acc);
        }
  return w;
}

TEST(SvdConv, TruncatedRankEqualsConvWithTheBestLowRankWeight) {
  for (const ConvSpec& s : Geometries()) {
    for (bool spatial : {false, true}) {
      SCOPED_TRACE(spatial ? "spatial" : "channel");
      Graph g = ConvGraph(s);
      const Graph orig = g;
      auto r = RunSvd(g, std::string("rank=4,round=1,mode=") + (spatial ? "spatial" : "channel"));
      ASSERT_TRUE(r.ok()) << r.status().message();
      const LayerReport* l = FindLayer(*r, "conv");
      ASSERT_NE(l, nullptr);
      ASSERT_EQ(l->action, spatial ? "svd-spatial" : "svd-channel") << l->reason;
      EXPECT_EQ(l->setting, 4);
      EXPECT_EQ(CountOps(g, "Conv"), 2);
      EXPECT_EQ(ComputeCost(g).macs, l->macs_after);  // analytic MACs agree with passes/cost.h
      EXPECT_EQ(ComputeCost(orig).macs, l->macs_before);
      EXPECT_LT(l->macs_after, l->macs_before);
      EXPECT_EQ(ComputeCost(g).params, l->params_after);
      // Eckart–Young on the reshaped kernel, against the reported (complete) spectrum.
      const Tensor wr = Reconstruct(g, spatial, s);
      const Tensor& w = *orig.value(orig.FindValue("W")).initializer;
      double err = 0, norm = 0, total = 0, discarded = 0;
      for (int64_t i = 0; i < w.numel(); ++i) {
        err += std::pow(w.data<float>()[i] - wr.data<float>()[i], 2);
        norm += std::pow(w.data<float>()[i], 2);
      }
      for (size_t i = 0; i < l->spectrum.size(); ++i) {
        total += std::pow(l->spectrum[i], 2);
        if (i >= 4) discarded += std::pow(l->spectrum[i], 2);
      }
      EXPECT_EQ(static_cast<int64_t>(l->spectrum.size()), l->full_setting);
      EXPECT_NEAR(total, norm, 1e-4 * norm);
      EXPECT_NEAR(err, discarded, 1e-4 * norm);
      EXPECT_GT(err, 0.1 * norm);  // random kernels: rank 4 drops a lot
      // The factorized graph computes exactly the conv with W_r.
      ExpectSameOutputs(g, ConvGraph(s, wr), s, 1e-4f);
    }
  }
}

TEST(SvdConv, GroupedAndDepthwiseConvsAreSkippedWithAReason) {
  ConvSpec grouped;
  grouped.group = 2;
  ConvSpec depthwise;
  depthwise.cin = depthwise.cout = 8;
  depthwise.group = 8;
  for (const ConvSpec& s : {grouped, depthwise}) {
    Graph g = ConvGraph(s);
    auto r = RunSvd(g, "rank=1,round=1");
    ASSERT_TRUE(r.ok()) << r.status().message();
    ASSERT_EQ(r->layers.size(), 1u);
    EXPECT_EQ(r->layers[0].action, "skipped");
    EXPECT_NE(r->layers[0].reason.find(s.group == 8 ? "depthwise" : "grouped"), std::string::npos) << r->layers[0].reason;
    EXPECT_EQ(CountOps(g, "Conv"), 1);
  }
}

TEST(SvdConv, SmallConvThatCannotShrinkIsSkipped) {
  ConvSpec s;  // 1 input channel, 16 outputs: [16, 9] breaks even at rank 5, below round=8
  s.cin = 1;
  Graph g = ConvGraph(s);
  auto r = RunSvd(g, "energy=0.5");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->layers[0].action, "skipped");
  EXPECT_NE(r->layers[0].reason.find("round=8"), std::string::npos) << r->layers[0].reason;
  EXPECT_EQ(CountOps(g, "Conv"), 1);
}

}  // namespace
}  // namespace whittle
