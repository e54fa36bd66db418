// The --circulant pass: the rewrite of Gemm/MatMul into BlockCirculantMatMul (outputs equal to
// the original model with each weight replaced by its block-circulant fit), the lowering to
// standard ONNX, the bundled MLP's parameter saving, options, skips and idempotence.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "lib/ir/circulant_format.h"
#include "lib/onnx/model_io.h"
#include "lib/ops/op_def.h"
#include "passes/circulant/circulant_pass.h"
#include "passes/cost.h"
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

// The original model with every rewritten weight replaced by the dense expansion of its blocks:
// what the circulant model must compute.
Graph Expanded(const Graph& circ, const Graph& original) {
  std::map<std::string, std::vector<float>> w;
  for (const Node& n : circ.nodes()) {
    if (n.op_type != "BlockCirculantMatMul") continue;
    const CirculantAttrs a = CirculantAttrsOf(n.attrs);
    std::vector<float>& d = w[n.name];
    d.resize(static_cast<size_t>(a.n * a.k));
    ExpandCirculant(a, circ.ConstInput(n, 1)->data<float>(), d.data());
  }
  return WithDenseWeights(original, w);
}

TEST(CirculantPass, BundledMlpComputesWithItsFittedWeights) {
  RegisterAllOps();
  auto g = LoadModel(std::string(WHITTLE_SOURCE_DIR) + "/models/mlp.onnx");
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto pass = MakeCirculantPass(*PassOptions::Parse("circulant", "block=8"));
  ASSERT_TRUE(pass.ok()) << pass.status().message();
  Graph c = *g;
  PassContext ctx;
  auto rep = (*pass)->Run(c, ctx);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_EQ(CountOps(c, "BlockCirculantMatMul"), 3);
  EXPECT_EQ(CountOps(c, "Gemm"), 0);
  // The hidden layers (784->256, 256->128) keep >= 7x fewer parameters (weights + biases).
  int64_t before = 0, after = 0, rewritten = 0;
  for (const LayerReport& l : rep->layers) {
    if (l.action != "circulant") continue;
    ++rewritten;
    EXPECT_EQ(l.setting, 8);
    EXPECT_LT(l.macs_after, l.macs_before) << l.node;
    if (l.params_before > 128 * 10 + 10) {
      before += l.params_before;
      after += l.params_after;
    }
  }
  EXPECT_EQ(rewritten, 3);
  EXPECT_EQ(before, 784 * 256 + 256 + 256 * 128 + 128);
  EXPECT_EQ(after, 32 * 98 * 8 + 256 + 16 * 32 * 8 + 128);
  EXPECT_GE(before, 7 * after) << before << " vs " << after;
  const Tensor x = RandomFloat({64, 1, 28, 28}, 4, 0.f, 1.f);
  auto y = RunGraph(c, x);
  auto y2 = RunGraph(c, x, Backend::kCpu, 2);
  auto yref = RunGraph(c, x, Backend::kReference);
  auto yd = RunGraph(Expanded(c, *g), x);
  ASSERT_TRUE(y.ok() && y2.ok() && yref.ok() && yd.ok()) << y.status().message();
  EXPECT_TRUE(::whittle::testing::TensorsClose((*y)[0], (*yd)[0], 1e-4f, 1e-4f));
  EXPECT_TRUE(::whittle::testing::TensorsClose((*y2)[0], (*y)[0], 0.f, 0.f));  // threads change nothing
  EXPECT_TRUE(::whittle::testing::TensorsClose((*yref)[0], (*yd)[0], 1e-4f, 1e-4f));
  // Saved and loaded: the same model.
  const std::string path = ::testing::TempDir() + "/circulant_mlp.onnx";
  ASSERT_TRUE(SaveModel(c, path).ok());
  auto back = LoadModel(path);
  ASSERT_TRUE(back.ok()) << back.status().message();
  auto yb = RunGraph(*back, x);
  ASSERT_TRUE(yb.ok()) << yb.status().message();
  EXPECT_TRUE(::whittle::testing::TensorsClose((*yb)[0], (*y)[0], 0.f, 0.f));
  // Lowered to standard ONNX: the same outputs, no ai.whittle op left.
  Graph low = c;
  auto lowered = LowerCirculant(low);
  ASSERT_TRUE(lowered.ok()) << lowered.status().message();
  EXPECT_EQ(*lowered, 3);
  EXPECT_EQ(CountOps(low, "BlockCirculantMatMul"), 0);
  EXPECT_EQ(CountOps(low, "MatMul"), 3);
  EXPECT_TRUE(low.Verify().ok());
  auto yl = RunGraph(low, x);
  ASSERT_TRUE(yl.ok()) << yl.status().message();
  EXPECT_TRUE(::whittle::testing::TensorsClose((*yl)[0], (*yd)[0], 1e-4f, 1e-4f));
  // The DFT form (opset raised 13 -> 17): the same outputs through ONNX's DFT op, which stores
  // the spectra (N*K/B-sized) rather than the dense matrix.
  Graph fft = c;
  auto dft_lowered = LowerCirculantDft(fft);
  ASSERT_TRUE(dft_lowered.ok()) << dft_lowered.status().message();
  EXPECT_EQ(*dft_lowered, 3);
  EXPECT_EQ(CountOps(fft, "BlockCirculantMatMul"), 0);
  EXPECT_EQ(CountOps(fft, "DFT"), 6);
  EXPECT_EQ(fft.OpsetFor(""), 17);
  EXPECT_TRUE(fft.Verify().ok());
  auto yf = RunGraph(fft, x);
  ASSERT_TRUE(yf.ok()) << yf.status().message();
  EXPECT_TRUE(::whittle::testing::TensorsClose((*yf)[0], (*yd)[0], 1e-4f, 1e-4f));
  // Idempotent: nothing left to rewrite.
  Graph again = c;
  auto rep2 = (*pass)->Run(again, ctx);
  ASSERT_TRUE(rep2.ok());
  EXPECT_EQ(CountOps(again, "BlockCirculantMatMul"), 3);
  for (const LayerReport& l : rep2->layers) EXPECT_NE(l.action, "circulant");
}

Graph ThreeLayers() {
  AttributeMap nt;  // Gemm without transB, bias [1, N]
  Graph g = GraphBuilder(13)
                .Input("x", DType::kFloat32, {Dim::Symbol("batch"), 40})
                .Init("b1", RandomFloat({40, 24}, 1))
                .Init("c1", RandomFloat({1, 24}, 2))
                .Init("b2", RandomFloat({24, 20}, 3))
                .Init("b3", RandomFloat({20, 1}, 4))
                .Op("Gemm", {"x", "b1", "c1"}, {"h"}, nt)
                .Op("MatMul", {"h", "b2"}, {"h2"})
                .Op("MatMul", {"h2", "b3"}, {"y"})
                .Output("y")
                .Build();
  g.nodes()[0].name = "g1";
  g.nodes()[1].name = "m2";
  g.nodes()[2].name = "m3";
  return g;
}

TEST(CirculantPass, MatMulAndGemmLayoutsBiasShapesAndSkips) {
  RegisterAllOps();
  const Graph g = ThreeLayers();
  auto pass = MakeCirculantPass(*PassOptions::Parse("circulant", "block=4,layer=m2:block=3"));
  ASSERT_TRUE(pass.ok()) << pass.status().message();
  Graph c = g;
  PassContext ctx;
  auto rep = (*pass)->Run(c, ctx);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_EQ(CountOps(c, "BlockCirculantMatMul"), 2);
  int seen = 0;
  for (const LayerReport& l : rep->layers) {
    if (l.node == "m3") {  // 20 x 1: one output padded to a block stores 20 values, no saving
      EXPECT_EQ(l.action, "skipped");
      EXPECT_NE(l.reason.find("does not shrink"), std::string::npos) << l.reason;
      ++seen;
    }
    if (l.node == "m2") {  // 20 x 24 at block 3: [7, 8, 3]
      EXPECT_EQ(l.action, "circulant");
      EXPECT_EQ(l.setting, 3);
      EXPECT_EQ(l.params_after, 7 * 8 * 3);
      ++seen;
    }
    if (l.node == "g1") {
      EXPECT_EQ(l.params_after, 6 * 10 * 4 + 24);
      ++seen;
    }
  }
  EXPECT_EQ(seen, 3);
  const Tensor x = RandomFloat({3, 40}, 9);
  auto y = RunGraph(c, x);
  auto yd = RunGraph(Expanded(c, g), x);
  ASSERT_TRUE(y.ok() && yd.ok()) << y.status().message() << yd.status().message();
  EXPECT_TRUE(::whittle::testing::TensorsClose((*y)[0], (*yd)[0], 1e-4f, 1e-4f));
  Graph low = c;
  ASSERT_TRUE(LowerCirculant(low).ok());
  auto yl = RunGraph(low, x);
  ASSERT_TRUE(yl.ok()) << yl.status().message();
  EXPECT_TRUE(::whittle::testing::TensorsClose((*yl)[0], (*yd)[0], 1e-4f, 1e-4f));

  // block=1 shrinks nothing: every layer skipped with the reason; skip=1 and exclude= honoured.
  auto one = MakeCirculantPass(*PassOptions::Parse("circulant", "block=1"));
  ASSERT_TRUE(one.ok());
  Graph o = g;
  auto r1 = (*one)->Run(o, ctx);
  ASSERT_TRUE(r1.ok());
  EXPECT_EQ(CountOps(o, "BlockCirculantMatMul"), 0);
  for (const LayerReport& l : r1->layers)
    if (l.node != "m3") {
      EXPECT_NE(l.reason.find("block=1"), std::string::npos) << l.node << ": " << l.reason;
    }
  auto sk = MakeCirculantPass(*PassOptions::Parse("circulant", "block=4,exclude=g1,layer=m2:skip=1"));
  ASSERT_TRUE(sk.ok()) << sk.status().message();
  Graph s = g;
  ASSERT_TRUE((*sk)->Run(s, ctx).ok());
  EXPECT_EQ(CountOps(s, "BlockCirculantMatMul"), 0);
}

TEST(CirculantPass, PointwiseConvRunsBetweenTransposes) {
  RegisterAllOps();
  AttributeMap k3;
  k3.Set("pads", Attribute::Ints({1, 1, 1, 1}));
  AttributeMap strided;
  strided.Set("strides", Attribute::Ints({2, 2}));
  Graph g = GraphBuilder(13)
                .Input("x", DType::kFloat32, {Dim::Symbol("batch"), 12, 5, 6})
                .Init("w1", RandomFloat({20, 12, 1, 1}, 1))
                .Init("c1", RandomFloat({20}, 2))
                .Init("w2", RandomFloat({8, 20, 3, 3}, 3))
                .Init("w3", RandomFloat({16, 8, 1, 1}, 4))
                .Init("w4", RandomFloat({16, 16, 1, 1}, 5))
                .Op("Conv", {"x", "w1", "c1"}, {"h1"})
                .Op("Conv", {"h1", "w2"}, {"h2"}, k3)
                .Op("Conv", {"h2", "w3"}, {"h3"})
                .Op("Conv", {"h3", "w4"}, {"y"}, strided)
                .Output("y")
                .Build();
  for (size_t i = 0; i < 4; ++i) g.nodes()[i].name = "c" + std::to_string(i + 1);
  ASSERT_TRUE(InferShapes(g).ok());  // as the PassManager does before a pass (for the MACs)
  auto pass = MakeCirculantPass(*PassOptions::Parse("circulant", "block=4"));
  ASSERT_TRUE(pass.ok());
  Graph c = g;
  PassContext ctx;
  auto rep = (*pass)->Run(c, ctx);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  { Status v = c.Verify(); ASSERT_TRUE(v.ok()) << v.message(); }
  EXPECT_EQ(CountOps(c, "BlockCirculantMatMul"), 2);  // c1 and c3; the 3x3 and the strided stay
  EXPECT_EQ(CountOps(c, "Conv"), 2);
  EXPECT_EQ(CountOps(c, "Transpose"), 4);
  for (const LayerReport& l : rep->layers) {
    if (l.node == "c4") {
      EXPECT_EQ(l.action, "skipped");
      EXPECT_NE(l.reason.find("strides"), std::string::npos) << l.reason;
    }
    if (l.node == "c3") {  // 30 pixels x (4 x 2 blocks x (2 real + 4 x 1 complex bins) + 6 FFTs x 8)
      EXPECT_EQ(l.macs_before, 30 * 16 * 8);
      EXPECT_EQ(l.macs_after, 30 * (8 * 6 + 6 * 8));
      EXPECT_EQ(l.params_after, 4 * 2 * 4);
    }
  }
  const Tensor x = RandomFloat({2, 12, 5, 6}, 9);
  auto y = RunGraph(c, x);
  auto yd = RunGraph(Expanded(c, g), x);
  ASSERT_TRUE(y.ok() && yd.ok()) << y.status().message() << yd.status().message();
  EXPECT_TRUE(::whittle::testing::TensorsClose((*y)[0], (*yd)[0], 1e-4f, 1e-4f));
  Graph low = c;
  ASSERT_TRUE(LowerCirculant(low).ok());
  auto yl = RunGraph(low, x);
  ASSERT_TRUE(yl.ok()) << yl.status().message();
  EXPECT_TRUE(::whittle::testing::TensorsClose((*yl)[0], (*yd)[0], 1e-4f, 1e-4f));
}

TEST(CirculantPass, OptionErrors) {
  EXPECT_TRUE(MakeCirculantPass(*PassOptions::Parse("circulant", "")).ok());  // block=8 by default
  EXPECT_FALSE(MakeCirculantPass(*PassOptions::Parse("circulant", "block=0")).ok());
  EXPECT_FALSE(MakeCirculantPass(*PassOptions::Parse("circulant", "block=-2")).ok());
  EXPECT_FALSE(MakeCirculantPass(*PassOptions::Parse("circulant", "block=4097")).ok());
  EXPECT_FALSE(MakeCirculantPass(*PassOptions::Parse("circulant", "block=x")).ok());
  EXPECT_FALSE(MakeCirculantPass(*PassOptions::Parse("circulant", "blok=4")).ok());
  EXPECT_FALSE(MakeCirculantPass(*PassOptions::Parse("circulant", "layer=m2:block=0")).ok());
  EXPECT_FALSE(MakeCirculantPass(*PassOptions::Parse("circulant", "layer=m2:rank=3")).ok());
  EXPECT_FALSE(MakeCirculantPass(*PassOptions::Parse("circulant", "layer=m2:skip=2")).ok());
  RegisterAllOps();
  auto ex = MakeCirculantPass(*PassOptions::Parse("circulant", "exclude=nope"));
  ASSERT_TRUE(ex.ok());
  Graph e = ThreeLayers();
  PassContext ctx;
  EXPECT_FALSE((*ex)->Run(e, ctx).ok());
}

}  // namespace
}  // namespace whittle
