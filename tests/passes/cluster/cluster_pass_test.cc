// The --cluster pass: 1-D k-means, the rewrite of Gemm/MatMul into CodebookMatMul (outputs equal
// to the original model with each weight replaced by its codebook entry), the lowering to standard
// ONNX, options, skips and idempotence.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "lib/ir/codebook_format.h"
#include "lib/onnx/model_io.h"
#include "lib/ops/op_def.h"
#include "passes/cluster/cluster_pass.h"
#include "passes/cluster/kmeans.h"
#include "tests/util/graph_builder.h"
#include "tests/util/test_util.h"
#include "whittle/session.h"

namespace whittle {
namespace {

using ::whittle::testing::CountOps;
using ::whittle::testing::GraphBuilder;
using ::whittle::testing::RandomFloat;
using ::whittle::testing::RunGraph;
using ::whittle::testing::WithDenseWeights;

TEST(KMeans1D, FindsTheObviousClustersAndIsAFixedPoint) {
  const std::vector<float> v{0.f, 0.1f, 0.2f, 10.f, 10.1f, 20.f, 0.15f, 19.9f};
  const KMeans1D r = RunKMeans1D(v.data(), static_cast<int64_t>(v.size()), 3, 5);
  ASSERT_EQ(r.centroids.size(), 3u);
  EXPECT_NEAR(r.centroids[0], 0.1125, 1e-5);
  EXPECT_NEAR(r.centroids[1], 10.05, 1e-5);
  EXPECT_NEAR(r.centroids[2], 19.95, 1e-5);
  const std::vector<uint8_t> want{0, 0, 0, 1, 1, 2, 0, 2};
  EXPECT_EQ(r.assign, want);

  // Trained-weight-like data: each centroid is the mean of its members, each value goes to its
  // nearest centroid, the same seed gives the same codebook.
  const Tensor w = RandomFloat({5000}, 3);
  const KMeans1D a = RunKMeans1D(w.data<float>(), 5000, 16, 9), b = RunKMeans1D(w.data<float>(), 5000, 16, 9);
  EXPECT_EQ(a.centroids, b.centroids);
  ASSERT_EQ(a.centroids.size(), 16u);
  std::vector<double> sum(16, 0.0);
  std::vector<int> cnt(16, 0);
  for (int i = 0; i < 5000; ++i) {
    const float x = w.data<float>()[i];
    const int j = a.assign[static_cast<size_t>(i)];
    sum[static_cast<size_t>(j)] += x;
    ++cnt[static_cast<size_t>(j)];
    for (float c : a.centroids) ASSERT_LE(std::fabs(x - a.centroids[static_cast<size_t>(j)]), std::fabs(x - c) + 1e-6f);
  }
  for (size_t j = 0; j < 16; ++j)
    if (cnt[j]) {
      EXPECT_NEAR(a.centroids[j], sum[j] / cnt[j], 1e-4) << "centroid " << j;
    }
  // Uniform data: 16 clusters of a [-1, 1] spread leave an RMS error near 2/16/sqrt(12).
  EXPECT_LT(std::sqrt(a.sse / 5000), 1.2 * 2.0 / 16 / std::sqrt(12.0));

  // Fewer distinct values than k: exact.
  const std::vector<float> few{1.f, 2.f, 1.f, 3.f};
  const KMeans1D e = RunKMeans1D(few.data(), 4, 8, 1);
  EXPECT_EQ(e.centroids, (std::vector<float>{1.f, 2.f, 3.f}));
  EXPECT_EQ(e.sse, 0.0);
}

// The clustered model must compute exactly what the original computes with every weight replaced
// by its codebook entry: rebuild that dense model from the codebooks and compare.
Graph Decoded(const Graph& clustered, const Graph& original) {
  std::map<std::string, std::vector<float>> w;
  for (const Node& n : clustered.nodes()) {
    if (n.op_type != "CodebookMatMul") continue;
    const CodebookAttrs ca = CodebookAttrsOf(n.attrs);
    const Tensor* cb = clustered.ConstInput(n, 1);
    const Tensor* idx = clustered.ConstInput(n, 2);
    std::vector<float>& d = w[n.name];
    d.resize(static_cast<size_t>(ca.n * ca.k));
    for (int64_t i = 0; i < ca.n * ca.k; ++i)
      d[static_cast<size_t>(i)] = cb->data<float>()[CodebookIndexAt(idx->data<uint8_t>(), i, ca.bits)];
  }
  return WithDenseWeights(original, w);
}

TEST(ClusterPass, BundledMlpComputesWithItsCodebooks) {
  RegisterAllOps();
  auto g = LoadModel(std::string(WHITTLE_SOURCE_DIR) + "/models/mlp.onnx");
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto pass = MakeClusterPass(*PassOptions::Parse("cluster", "k=16"));
  ASSERT_TRUE(pass.ok()) << pass.status().message();
  Graph c = *g;
  PassContext ctx;
  auto rep = (*pass)->Run(c, ctx);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_EQ(CountOps(c, "CodebookMatMul"), 3);
  EXPECT_EQ(CountOps(c, "Gemm"), 0);
  int64_t dense = 0, packed = 0;
  for (const Value& v : g->values())
    if (v.initializer) dense += static_cast<int64_t>(v.initializer->nbytes());
  for (const Value& v : c.values())
    if (v.initializer) packed += static_cast<int64_t>(v.initializer->nbytes());
  EXPECT_GT(dense, 7 * packed) << dense << " vs " << packed;
  const Tensor x = RandomFloat({8, 1, 28, 28}, 4, 0.f, 1.f);
  auto y = RunGraph(c, x);
  auto yref = RunGraph(c, x, Backend::kReference);
  auto yd = RunGraph(Decoded(c, *g), x);
  ASSERT_TRUE(y.ok() && yref.ok() && yd.ok()) << y.status().message();
  EXPECT_TRUE(::whittle::testing::TensorsClose((*y)[0], (*yd)[0], 1e-4f, 1e-4f));
  EXPECT_TRUE(::whittle::testing::TensorsClose((*yref)[0], (*yd)[0], 1e-4f, 1e-4f));
  // Lowered to standard ONNX: the same outputs, no ai.whittle op left.
  Graph low = c;
  auto lowered = LowerCodebooks(low);
  ASSERT_TRUE(lowered.ok()) << lowered.status().message();
  EXPECT_EQ(*lowered, 3);
  EXPECT_EQ(CountOps(low, "CodebookMatMul"), 0);
  EXPECT_EQ(CountOps(low, "Gather"), 3);
  auto yl = RunGraph(low, x);
  ASSERT_TRUE(yl.ok()) << yl.status().message();
  EXPECT_TRUE(::whittle::testing::TensorsClose((*yl)[0], (*yd)[0], 1e-4f, 1e-4f));
  // Idempotent: nothing left to cluster.
  Graph again = c;
  auto rep2 = (*pass)->Run(again, ctx);
  ASSERT_TRUE(rep2.ok());
  EXPECT_EQ(CountOps(again, "CodebookMatMul"), 3);
  for (const LayerReport& l : rep2->layers) EXPECT_NE(l.action, "cluster");
}

TEST(ClusterPass, MatMulAndGemmLayoutsBiasShapesAndSkips) {
  RegisterAllOps();
  AttributeMap nt;  // Gemm without transB, bias [1, N]
  Graph g = GraphBuilder(13)
                .Input("x", DType::kFloat32, {Dim::Symbol("batch"), 40})
                .Init("b1", RandomFloat({40, 24}, 1))
                .Init("c1", RandomFloat({1, 24}, 2))
                .Init("b2", RandomFloat({24, 20}, 3))
                .Init("b3", RandomFloat({20, 2}, 4))
                .Op("Gemm", {"x", "b1", "c1"}, {"h"}, nt)
                .Op("MatMul", {"h", "b2"}, {"h2"})
                .Op("MatMul", {"h2", "b3"}, {"y"})
                .Output("y")
                .Build();
  g.nodes()[0].name = "g1";
  g.nodes()[1].name = "m2";
  g.nodes()[2].name = "m3";
  auto pass = MakeClusterPass(*PassOptions::Parse("cluster", "k=4,layer=m2:k=32,layer=m3:k=256"));
  ASSERT_TRUE(pass.ok()) << pass.status().message();
  Graph c = g;
  PassContext ctx;
  auto rep = (*pass)->Run(c, ctx);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_EQ(CountOps(c, "CodebookMatMul"), 2);
  int seen = 0;
  for (const LayerReport& l : rep->layers) {
    if (l.node == "m3") {  // 40 weights: a 256-entry codebook alone is larger than them
      EXPECT_EQ(l.action, "skipped");
      EXPECT_NE(l.reason.find("too small"), std::string::npos) << l.reason;
      ++seen;
    }
    if (l.node == "m2") {
      EXPECT_EQ(l.action, "cluster");
      EXPECT_EQ(l.setting, 32);
      EXPECT_NE(l.detail.find("8-bit"), std::string::npos) << l.detail;
      ++seen;
    }
  }
  EXPECT_EQ(seen, 2);
  const Tensor x = RandomFloat({3, 40}, 9);
  auto y = RunGraph(c, x);
  auto yd = RunGraph(Decoded(c, g), x);
  ASSERT_TRUE(y.ok() && yd.ok()) << y.status().message() << yd.status().message();
  EXPECT_TRUE(::whittle::testing::TensorsClose((*y)[0], (*yd)[0], 1e-4f, 1e-4f));

  // Options are checked.
  EXPECT_FALSE(MakeClusterPass(*PassOptions::Parse("cluster", "k=1")).ok());
  EXPECT_FALSE(MakeClusterPass(*PassOptions::Parse("cluster", "k=257")).ok());
  EXPECT_FALSE(MakeClusterPass(*PassOptions::Parse("cluster", "kk=4")).ok());
  auto ex = MakeClusterPass(*PassOptions::Parse("cluster", "exclude=nope"));
  ASSERT_TRUE(ex.ok());
  Graph e = g;
  EXPECT_FALSE((*ex)->Run(e, ctx).ok());
}

}  // namespace
}  // namespace whittle
