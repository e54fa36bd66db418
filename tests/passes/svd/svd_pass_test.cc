// --svd on Gemm and MatMul: rank choice (rank=, energy=, round=), the rewrite's math against
// weights with a known spectrum (Eckart–Young), attributes (transA/transB, alpha/beta, bias),
// skipped layers, idempotence, option errors and the save/load round trip.
#include <gtest/gtest.h>

#include <cmath>

#include "lib/onnx/model_io.h"
#include "passes/cost.h"
#include "passes/svd/svd_pass.h"
#include "tests/passes/svd/svd_test_util.h"
#include "tests/util/graph_builder.h"
#include "tests/util/scratch_dir.h"
#include "tests/util/test_util.h"

namespace whittle {
namespace {

using testing::CountOps;
using testing::FindLayer;
using testing::FindNode;
using testing::InitOf;
using testing::RunGraph;
using testing::RunSvd;

constexpr int64_t kK = 64, kN = 48;

// Spectrum 0.8^i over 48 values: energy ranks are easy to work out by hand.
std::vector<double> Spectrum() { return testing::GeometricSpectrum(kN, 4.0, 0.8); }

// x [batch, 64] -> Gemm(W, C) -> y [batch, 48]; W stored [48, 64] when trans_b.
Graph GemmGraph(bool trans_b, float alpha = 1.f, float beta = 1.f, bool bias = true) {
  std::vector<float> w = testing::MatrixWithSpectrum(kK, kN, Spectrum(), 21);  // [K, N]
  Tensor wt(DType::kFloat32, trans_b ? Dims{kN, kK} : Dims{kK, kN});
  for (int64_t k = 0; k < kK; ++k)
    for (int64_t n = 0; n < kN; ++n) wt.data<float>()[trans_b ? n * kK + k : k * kN + n] = w[static_cast<size_t>(k * kN + n)];
  testing::GraphBuilder b;
  b.Input("x", DType::kFloat32, {Dim::Symbol("batch"), kK});
  b.Init("W", wt);
  AttributeMap a;
  if (trans_b) a.Set("transB", Attribute::Int(1));
  if (alpha != 1.f) a.Set("alpha", Attribute::Float(alpha));
  if (beta != 1.f) a.Set("beta", Attribute::Float(beta));
  if (bias) b.Init("C", testing::RandomFloat({kN}, 22));
  if (bias)
    b.Op("Gemm", {"x", "W", "C"}, {"y"}, a);
  else
    b.Op("Gemm", {"x", "W"}, {"y"}, a);
  b.Output("y");
  Graph g = b.Build();
  g.nodes()[0].name = "fc";
  WH_CHECK(InferShapes(g).ok());
  return g;
}

// The effective [K, N] weight of the factorized pair (first op's U times second op's V).
std::vector<double> ProductKN(const Graph& g, const std::string& name) {
  const Node* first = FindNode(g, name + "/svd_u");
  const Node* second = FindNode(g, name);
  WH_CHECK(first && second);
  const Tensor& u = InitOf(g, *first, 1);
  const Tensor& v = InitOf(g, *second, 1);
  const bool tu = first->attrs.GetInt("transB", 0) != 0, tv = second->attrs.GetInt("transB", 0) != 0;
  const int64_t r = tu ? u.dim(0) : u.dim(1);
  std::vector<double> w(static_cast<size_t>(kK * kN), 0.0);
  for (int64_t k = 0; k < kK; ++k)
    for (int64_t n = 0; n < kN; ++n)
      for (int64_t j = 0; j < r; ++j) {
        const float uu = tu ? u.data<float>()[j * kK + k] : u.data<float>()[k * r + j];
        const float vv = tv ? v.data<float>()[n * r + j] : v.data<float>()[j * kN + n];
        w[static_cast<size_t>(k * kN + n)] += static_cast<double>(uu) * vv;
      }
  return w;
}

double DiscardedEnergy(int64_t r) {
  double d = 0;
  for (size_t i = static_cast<size_t>(r); i < Spectrum().size(); ++i) d += Spectrum()[i] * Spectrum()[i];
  return d;
}

double TotalEnergy() { return DiscardedEnergy(0); }

// Smallest r keeping `e` of the energy of Spectrum().
int64_t EnergyRank(double e) {
  double acc = 0;
  for (size_t i = 0; i < Spectrum().size(); ++i) {
    acc += Spectrum()[i] * Spectrum()[i];
    if (acc >= e * TotalEnergy()) return static_cast<int64_t>(i + 1);
  }
  return kN;
}

TEST(SvdPass, RankOptionRoundsUpAndFactorsGemm) {
  Graph g = GemmGraph(false);
  auto r = RunSvd(g, "rank=5");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(CountOps(g, "Gemm"), 2);
  const LayerReport* l = FindLayer(*r, "fc");
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->action, "svd");
  EXPECT_EQ(l->setting, 8);  // 5 rounded up to a multiple of 8
  EXPECT_EQ(l->full_setting, kN);
  EXPECT_EQ(l->detail.rfind("rank 8 of 48", 0), 0u) << l->detail;
  EXPECT_EQ(l->macs_before, kK * kN);
  EXPECT_EQ(l->macs_after, 8 * (kK + kN));
  EXPECT_EQ(l->params_before, kK * kN + kN);
  EXPECT_EQ(l->params_after, 8 * (kK + kN) + kN);
  EXPECT_EQ(ComputeCost(g).macs, l->macs_after);  // the report agrees with passes/cost.h
  ASSERT_EQ(l->spectrum.size(), static_cast<size_t>(kN));
  for (size_t i = 0; i < l->spectrum.size(); ++i) EXPECT_NEAR(l->spectrum[i], Spectrum()[i], 1e-4) << i;

  Graph g1 = GemmGraph(false);
  r = RunSvd(g1, "rank=5,round=1");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(FindLayer(*r, "fc")->setting, 5);
  // Rounding goes up but never past the full rank; a rank past break-even (27 for 64x48) is
  // left alone.
  Graph g2 = GemmGraph(false);
  r = RunSvd(g2, "rank=17,round=16");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(FindLayer(*r, "fc")->action, "skipped");
  EXPECT_NE(FindLayer(*r, "fc")->reason.find("rank 32 would not reduce MACs"), std::string::npos)
      << FindLayer(*r, "fc")->reason;
  EXPECT_EQ(CountOps(g2, "Gemm"), 1);
  Graph g3 = GemmGraph(false);
  r = RunSvd(g3, "rank=100");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_NE(FindLayer(*r, "fc")->reason.find("rank 48 would not"), std::string::npos) << FindLayer(*r, "fc")->reason;
}

TEST(SvdPass, EnergyChoosesTheSmallestRankAndObeysEckartYoung) {
  for (double e : {0.5, 0.9, 0.99}) {
    Graph g = GemmGraph(false);
    const Graph orig = g;
    auto r = RunSvd(g, "energy=" + std::to_string(e) + ",round=1");
    ASSERT_TRUE(r.ok()) << r.status().message();
    const LayerReport* l = FindLayer(*r, "fc");
    ASSERT_NE(l, nullptr);
    const int64_t want = EnergyRank(e);
    EXPECT_EQ(l->setting, want) << "energy " << e;
    // ||W - UV||_F^2 equals the discarded sigma^2.
    const std::vector<double> p = ProductKN(g, "fc");
    const Tensor& w = *orig.value(orig.FindValue("W")).initializer;
    double err = 0;
    for (size_t i = 0; i < p.size(); ++i) err += (w.data<float>()[i] - p[i]) * (w.data<float>()[i] - p[i]);
    EXPECT_NEAR(err, DiscardedEnergy(want), 1e-4 * TotalEnergy()) << "energy " << e;
  }
  // Default round=8: the energy rank rounded up.
  Graph g = GemmGraph(false);
  auto r = RunSvd(g, "energy=0.9");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(FindLayer(*r, "fc")->setting, (EnergyRank(0.9) + 7) / 8 * 8);
  // No option at all means energy=0.95.
  Graph d = GemmGraph(false);
  r = RunSvd(d, "");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(FindLayer(*r, "fc")->setting, (EnergyRank(0.95) + 7) / 8 * 8);
}

// Outputs of the factorized graph equal alpha * x (UV) + beta * C computed here, and differ
// from the original by alpha * x (W - UV).
void CheckGemmOutputs(bool trans_b, float alpha, float beta, bool bias) {
  SCOPED_TRACE(::testing::Message() << "transB=" << trans_b << " alpha=" << alpha << " beta=" << beta << " bias=" << bias);
  Graph g = GemmGraph(trans_b, alpha, beta, bias);
  const Graph orig = g;
  auto r = RunSvd(g, "rank=12");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(CountOps(g, "Gemm"), 2);
  const Node* second = FindNode(g, "fc");
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(second->inputs.size(), bias ? 3u : 2u);  // the bias stays on the second op
  EXPECT_EQ(g.value(second->outputs[0]).name, "y");
  EXPECT_EQ(FindNode(g, "fc/svd_u")->inputs.size(), 2u);
  const Tensor x = testing::RandomFloat({5, kK}, 31);
  auto y0 = RunGraph(orig, {{"x", x}});
  auto y1 = RunGraph(g, {{"x", x}});
  ASSERT_TRUE(y0.ok() && y1.ok());
  const std::vector<double> p = ProductKN(g, "fc");
  const Tensor* c = bias ? &*orig.value(orig.FindValue("C")).initializer : nullptr;
  double max_diff = 0;
  for (int64_t i = 0; i < 5; ++i)
    for (int64_t n = 0; n < kN; ++n) {
      double acc = 0;
      for (int64_t k = 0; k < kK; ++k) acc += x.data<float>()[i * kK + k] * p[static_cast<size_t>(k * kN + n)];
      double want = alpha * acc + (c ? beta * c->data<float>()[n] : 0.0);
      EXPECT_NEAR((*y1)[0].data<float>()[i * kN + n], want, 1e-4);
      max_diff = std::max(max_diff, 0.0 + std::fabs((*y1)[0].data<float>()[i * kN + n] - (*y0)[0].data<float>()[i * kN + n]));
    }
  EXPECT_GT(max_diff, 1e-4);  // rank 12 of 48 really dropped something
}

TEST(SvdPass, GemmTransBAlphaBetaBias) {
  CheckGemmOutputs(false, 1.f, 1.f, true);
  CheckGemmOutputs(true, 1.f, 1.f, true);
  CheckGemmOutputs(true, 0.5f, 2.f, true);
  CheckGemmOutputs(false, 1.5f, 1.f, false);
}

TEST(SvdPass, FullRankReproducesGemmWithTransA) {
  // A stored [K, M] with transA=1; W [64, 16] of rank 6, so its full-rank factorization
  // (energy=1) saves MACs and must reproduce the outputs.
  testing::GraphBuilder b;
  b.Input("x", DType::kFloat32, {kK, 3});
  b.Init("W", Tensor::FromVector<float>({kK, 16}, testing::MatrixWithSpectrum(kK, 16, {3, 2, 1, .5, .2, .1}, 41)));
  b.Init("C", testing::RandomFloat({1, 16}, 42));
  AttributeMap a;
  a.Set("transA", Attribute::Int(1));
  a.Set("alpha", Attribute::Float(0.7f));
  a.Set("beta", Attribute::Float(0.3f));
  b.Op("Gemm", {"x", "W", "C"}, {"y"}, a);
  b.Output("y");
  Graph g = b.Build();
  ASSERT_TRUE(InferShapes(g).ok());
  const Graph orig = g;
  auto r = RunSvd(g, "energy=1,round=1");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->layers[0].setting, 6);
  ASSERT_EQ(CountOps(g, "Gemm"), 2);
  const Node* first = FindNode(g, "Gemm_0/svd_u");
  const Node* second = FindNode(g, "Gemm_0");
  ASSERT_TRUE(first && second);
  EXPECT_EQ(first->attrs.GetInt("transA", 0), 1);
  EXPECT_EQ(second->attrs.GetInt("transA", 0), 0);
  EXPECT_FLOAT_EQ(second->attrs.GetFloat("alpha", 1.f), 0.7f);
  EXPECT_FALSE(first->attrs.Has("alpha"));
  const Tensor x = testing::RandomFloat({kK, 3}, 43);
  auto y0 = RunGraph(orig, {{"x", x}});
  auto y1 = RunGraph(g, {{"x", x}});
  ASSERT_TRUE(y0.ok() && y1.ok());
  EXPECT_LE(testing::MaxAbsDiff((*y0)[0], (*y1)[0]), 1e-4f);
}

TEST(SvdPass, MatMulWith3DInput) {
  testing::GraphBuilder b;
  b.Input("x", DType::kFloat32, {Dim::Symbol("batch"), 7, kK});
  b.Init("W", testing::RandomFloat({kK, 24}, 51));
  b.Op("MatMul", {"x", "W"}, {"y"});
  b.Output("y");
  Graph g = b.Build();
  g.nodes()[0].name = "proj";
  ASSERT_TRUE(InferShapes(g).ok());
  const Graph orig = g;
  const int64_t macs0 = ComputeCost(g).macs;
  EXPECT_EQ(macs0, 7 * kK * 24);
  auto r = RunSvd(g, "rank=16");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(CountOps(g, "MatMul"), 2);
  const LayerReport* l = FindLayer(*r, "proj");
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->macs_before, macs0);
  EXPECT_EQ(l->macs_after, 7 * 16 * (kK + 24));
  EXPECT_EQ(ComputeCost(g).macs, l->macs_after);
  const Tensor x = testing::RandomFloat({2, 7, kK}, 52);
  auto y0 = RunGraph(orig, {{"x", x}});
  auto y1 = RunGraph(g, {{"x", x}});
  ASSERT_TRUE(y0.ok() && y1.ok()) << y1.status().message();
  ASSERT_EQ((*y1)[0].dims(), (Dims{2, 7, 24}));
  // Random W has a flat spectrum: rank 16 of 24 changes outputs, but bounded by
  // ||x|| * ||W - W_16||_2 <= ||x|| * sigma_17.
  const float diff = testing::MaxAbsDiff((*y0)[0], (*y1)[0]);
  EXPECT_GT(diff, 1e-3f);
  double sigma17 = l->spectrum[16], xmax = 0;
  for (int64_t i = 0; i < x.numel(); ++i) xmax = std::max(xmax, 0.0 + std::fabs(x.data<float>()[i]));
  EXPECT_LE(diff, sigma17 * std::sqrt(static_cast<double>(kK)) * xmax * 1.001);
}

TEST(SvdPass, FullRankOfARankDeficientWeightIsExact) {
  // W of rank 6 [64, 48]: energy=1 picks rank 6 and the outputs are reproduced.
  std::vector<float> w = testing::MatrixWithSpectrum(kK, kN, {5, 4, 3, 2, 1, 0.5}, 61);
  testing::GraphBuilder b;
  b.Input("x", DType::kFloat32, {Dim::Symbol("batch"), kK});
  b.Init("W", Tensor::FromVector<float>({kK, kN}, w));
  b.Op("MatMul", {"x", "W"}, {"y"});
  b.Output("y");
  Graph g = b.Build();
  ASSERT_TRUE(InferShapes(g).ok());
  const Graph orig = g;
  auto r = RunSvd(g, "energy=1,round=1");
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->layers.size(), 1u);
  EXPECT_EQ(r->layers[0].setting, 6);
  const Tensor x = testing::RandomFloat({4, kK}, 62);
  auto y0 = RunGraph(orig, {{"x", x}});
  auto y1 = RunGraph(g, {{"x", x}});
  ASSERT_TRUE(y0.ok() && y1.ok());
  EXPECT_LE(testing::MaxAbsDiff((*y0)[0], (*y1)[0]), 1e-4f);
}

TEST(SvdPass, SkipsLayersThatWouldNotShrinkOrCannotBeFactored) {
  testing::GraphBuilder b;
  b.Input("x", DType::kFloat32, {Dim::Symbol("batch"), kK});
  b.Input("wdyn", DType::kFloat32, {kK, 8});
  b.Init("Wthin", testing::RandomFloat({kK, 4}, 71));
  b.Op("MatMul", {"x", "Wthin"}, {"thin"});  // 64x4, flat spectrum: energy .99 needs rank 4
  b.Op("MatMul", {"x", "wdyn"}, {"dyn"});    // weight is a graph input
  b.Output("thin");
  b.Output("dyn");
  Graph g = b.Build();
  g.nodes()[0].name = "thin";
  g.nodes()[1].name = "dyn";
  ASSERT_TRUE(InferShapes(g).ok());
  auto r = RunSvd(g, "energy=0.99,round=1");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(CountOps(g, "MatMul"), 2);
  const LayerReport* thin = FindLayer(*r, "thin");
  const LayerReport* dyn = FindLayer(*r, "dyn");
  ASSERT_TRUE(thin && dyn);
  EXPECT_EQ(thin->action, "skipped");
  EXPECT_NE(thin->reason.find("reduce MACs"), std::string::npos) << thin->reason;
  EXPECT_EQ(thin->macs_after, thin->macs_before);
  EXPECT_EQ(dyn->action, "skipped");
  EXPECT_NE(dyn->reason.find("not a constant"), std::string::npos) << dyn->reason;
}

TEST(SvdPass, ExcludeAndPerLayerOverrides) {
  testing::GraphBuilder b;
  b.Input("x", DType::kFloat32, {Dim::Symbol("batch"), kK});
  b.Init("W1", Tensor::FromVector<float>({kK, kN}, testing::MatrixWithSpectrum(kK, kN, Spectrum(), 81)));
  b.Init("W2", Tensor::FromVector<float>({kN, kK}, testing::MatrixWithSpectrum(kN, kK, Spectrum(), 82)));
  b.Init("W3", Tensor::FromVector<float>({kK, kN}, testing::MatrixWithSpectrum(kK, kN, Spectrum(), 83)));
  b.Op("MatMul", {"x", "W1"}, {"h1"});
  b.Op("MatMul", {"h1", "W2"}, {"h2"});
  b.Op("MatMul", {"h2", "W3"}, {"y"});
  b.Output("y");
  Graph g = b.Build();
  for (int i = 0; i < 3; ++i) g.nodes()[static_cast<size_t>(i)].name = "fc" + std::to_string(i + 1);
  ASSERT_TRUE(InferShapes(g).ok());
  auto r = RunSvd(g, "rank=8,exclude=fc1,layer=fc2:rank=16,layer=fc3:energy=0.5:mode=spatial");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(FindLayer(*r, "fc1")->action, "skipped");
  EXPECT_NE(FindLayer(*r, "fc1")->reason.find("exclude"), std::string::npos);
  EXPECT_EQ(FindLayer(*r, "fc2")->setting, 16);
  EXPECT_EQ(FindLayer(*r, "fc3")->setting, (EnergyRank(0.5) + 7) / 8 * 8);
  EXPECT_EQ(CountOps(g, "MatMul"), 5);
  // skip=1 leaves the layer alone.
  Graph g2 = b.Build();
  for (int i = 0; i < 3; ++i) g2.nodes()[static_cast<size_t>(i)].name = "fc" + std::to_string(i + 1);
  ASSERT_TRUE(InferShapes(g2).ok());
  r = RunSvd(g2, "rank=8,layer=fc2:skip=1");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(FindLayer(*r, "fc2")->action, "skipped");
  EXPECT_EQ(CountOps(g2, "MatMul"), 5);
}

TEST(SvdPass, RunningTwiceEqualsRunningOnce) {
  Graph once = GemmGraph(true);
  ASSERT_TRUE(RunSvd(once, "energy=0.9").ok());
  Graph twice = once;
  auto r = RunSvd(twice, "energy=0.9");
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(once.nodes().size(), twice.nodes().size());
  for (size_t i = 0; i < once.nodes().size(); ++i) {
    EXPECT_EQ(once.nodes()[i].name, twice.nodes()[i].name);
    EXPECT_EQ(once.nodes()[i].op_type, twice.nodes()[i].op_type);
  }
  ASSERT_EQ(once.values().size(), twice.values().size());
  for (size_t i = 0; i < once.values().size(); ++i) {
    const Value& a = once.values()[i];
    const Value& b = twice.values()[i];
    EXPECT_EQ(a.name, b.name);
    if (a.initializer) {
      ASSERT_TRUE(b.initializer.has_value());
      EXPECT_TRUE(a.initializer->BitwiseEquals(*b.initializer)) << a.name;
    }
  }
  for (const LayerReport& l : r->layers) {
    EXPECT_EQ(l.action, "skipped") << l.node;
    EXPECT_NE(l.reason.find("already"), std::string::npos) << l.reason;
  }
}

TEST(SvdPass, RejectsBadOptionsWithClearMessages) {
  auto make = [](const std::string& spec) -> Status {
    auto o = PassOptions::Parse("svd", spec);
    if (!o.ok()) return o.status();
    return MakeSvdPass(std::move(*o)).status();
  };
  auto expect_error = [&](const std::string& spec, const std::string& fragment) {
    Status s = make(spec);
    EXPECT_FALSE(s.ok()) << spec;
    EXPECT_NE(s.message().find(fragment), std::string::npos) << spec << ": " << s.message();
  };
  expect_error("rank=8,energy=0.9", "only one of");
  expect_error("energy=0", "energy");
  expect_error("energy=1.5", "out of range");
  expect_error("ratio=1", "ratio");
  expect_error("rank=0", "rank");
  expect_error("mode=diag", "channel|spatial");
  expect_error("algo=fast", "auto|full|randomized");
  expect_error("round=0", "round");
  expect_error("rnak=8", "unknown option 'rnak'");
  expect_error("layer=fc:rank=8:energy=0.5", "only one of");
  expect_error("layer=fc:skip=1:rank=8", "skip=1");
  expect_error("layer=fc:bogus=1", "unknown option 'bogus'");
  expect_error("energy=0.9,candidates=4", "ratio");
  EXPECT_TRUE(make("ratio=0.5,mode=spatial,round=1,algo=full,candidates=4,exclude=a,b").ok());

  // Names are checked against the model when the pass runs.
  Graph g = GemmGraph(false);
  auto r = RunSvd(g, "rank=8,exclude=fc,nosuch,layer=other:rank=4");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'nosuch'"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("'other'"), std::string::npos) << r.status().message();
  r = RunSvd(g, "ratio=0.5");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--calibration-data"), std::string::npos) << r.status().message();
}

TEST(SvdPass, SaveLoadRoundTripPassesTheOnnxChecker) {
  Graph g = GemmGraph(true);
  const Graph orig = g;
  ASSERT_TRUE(RunSvd(g, "rank=8").ok());
  testing::ScratchDir dir;
  const std::string path = dir / "svd.onnx";
  ASSERT_TRUE(SaveModel(g, path).ok());
  Status check = CheckModelWithOnnxChecker(path);
  EXPECT_TRUE(check.ok()) << check.message();
  auto loaded = LoadModel(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_EQ(CountOps(*loaded, "Gemm"), 2);
  const Tensor x = testing::RandomFloat({3, kK}, 91);
  auto y1 = RunGraph(g, {{"x", x}});
  auto y2 = RunGraph(*loaded, {{"x", x}});
  ASSERT_TRUE(y1.ok() && y2.ok());
  EXPECT_LE(testing::MaxAbsDiff((*y1)[0], (*y2)[0]), 0.f);
  // And the reloaded model is recognised as already factorized.
  auto again = RunSvd(*loaded, "rank=8");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(CountOps(*loaded, "Gemm"), 2);
}

TEST(SvdPass, RandomizedAlgorithmPicksTheSameEnergyRank) {
  std::vector<double> spec = testing::GeometricSpectrum(40, 10.0, 0.75);
  std::vector<float> w = testing::MatrixWithSpectrum(96, 80, spec, 101);
  for (size_t i = 0; i < w.size(); ++i) w[i] += 1e-4f * static_cast<float>((i * 7919) % 13) - 6e-4f;
  auto build = [&]() {
    testing::GraphBuilder b;
    b.Input("x", DType::kFloat32, {Dim::Symbol("batch"), 96});
    b.Init("W", Tensor::FromVector<float>({96, 80}, w));
    b.Op("MatMul", {"x", "W"}, {"y"});
    b.Output("y");
    Graph g = b.Build();
    WH_CHECK(InferShapes(g).ok());
    return g;
  };
  Graph gf = build(), gr = build();
  auto rf = RunSvd(gf, "energy=0.95,round=1,algo=full");
  auto rr = RunSvd(gr, "energy=0.95,round=1,algo=randomized");
  ASSERT_TRUE(rf.ok() && rr.ok()) << rr.status().message();
  EXPECT_EQ(rf->layers[0].setting, rr->layers[0].setting);
  EXPECT_LT(rr->layers[0].spectrum.size(), rf->layers[0].spectrum.size());  // only the top values
  for (size_t i = 0; i < 10; ++i) EXPECT_NEAR(rr->layers[0].spectrum[i], rf->layers[0].spectrum[i], 1e-3 * spec[0]);
}

}  // namespace
}  // namespace whittle
