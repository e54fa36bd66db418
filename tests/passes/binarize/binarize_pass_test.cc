// The --binarize pass: on the bundled CNN the binarized model computes what the float model with
// each weight replaced by sign(W) * alpha computes (activations=float), first/last layers stay
// float unless include= names them, exclude= works, the lowering to standard ONNX gives the same
// outputs (both modes), save -> load round trip, idempotence, options refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <set>
#include <map>
#include <string>
#include <vector>

#include "lib/ir/binary_format.h"
#include "lib/onnx/model_io.h"
#include "lib/ops/op_def.h"
#include "passes/binarize/binarize_pass.h"
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
using ::whittle::testing::TensorsClose;
using ::whittle::testing::WithDenseWeights;

StatusOr<Graph> Binarize(const Graph& g, const std::string& spec, PassReport* rep = nullptr) {
  WH_ASSIGN_OR_RETURN(PassOptions o, PassOptions::Parse("binarize", spec));
  WH_ASSIGN_OR_RETURN(auto pass, MakeBinarizePass(std::move(o)));
  Graph c = g;
  PassContext ctx;
  WH_ASSIGN_OR_RETURN(PassReport r, pass->Run(c, ctx));
  if (rep) *rep = r;
  return c;
}

Graph LoadCnn() {
  RegisterAllOps();
  auto g = LoadModel(std::string(WHITTLE_SOURCE_DIR) + "/models/cnn.onnx");
  EXPECT_TRUE(g.ok()) << g.status().message();
  return *g;
}

// The original model with each binarized layer's weight replaced by sign * alpha as floats.
Graph Decoded(const Graph& bin, const Graph& original) {
  std::map<std::string, std::vector<float>> w;
  for (const Node& n : bin.nodes()) {
    if (n.op_type != "BinaryMatMul" && n.op_type != "BinaryConv") continue;
    const Tensor* bits = bin.ConstInput(n, 1);
    const Tensor* alpha = bin.ConstInput(n, 2);
    int64_t weights = 0;  // the original layer's weight count
    for (const Node& o : original.nodes())
      if (o.name == n.name) weights = original.ConstInput(o, 1)->numel();
    const int64_t N = alpha->numel(), K = weights / N, words = BinaryWords(K);
    std::vector<float>& d = w[n.name];
    d.resize(static_cast<size_t>(N * K));
    for (int64_t r = 0; r < N; ++r)
      for (int64_t c = 0; c < K; ++c) {
        const float a = alpha->data<float>()[r];
        d[static_cast<size_t>(r * K + c)] = BinaryBit(bits->data<uint64_t>() + r * words, c) ? a : -a;
      }
  }
  return WithDenseWeights(original, w);
}

int64_t InitBytes(const Graph& g) {
  int64_t b = 0;
  for (const Value& v : g.values())
    if (v.initializer) b += static_cast<int64_t>(v.initializer->nbytes());
  return b;
}

TEST(BinarizePass, CnnComputesWithSignTimesAlphaAndFirstLastStayFloat) {
  const Graph g = LoadCnn();
  PassReport rep;
  auto b = Binarize(g, "", &rep);
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(CountOps(*b, "BinaryConv"), 1);
  EXPECT_EQ(CountOps(*b, "BinaryMatMul"), 1);
  EXPECT_EQ(CountOps(*b, "Conv"), 1);  // conv1: the first layer
  EXPECT_EQ(CountOps(*b, "Gemm"), 1);  // fc2: the logits
  for (const Node& n : b->nodes()) {
    if (n.name == "/conv1/Conv" || n.name == "/fc2/Gemm") {
      EXPECT_TRUE(n.domain.empty()) << n.name;
    }
    if (n.name == "/conv2/Conv") {
      EXPECT_EQ(n.op_type, "BinaryConv");
    }
    if (n.name == "/fc1/Gemm") {
      EXPECT_EQ(n.op_type, "BinaryMatMul");
    }
  }
  int skipped = 0;
  for (const LayerReport& l : rep.layers) {
    if (l.action == "skipped") {
      ++skipped;
      EXPECT_NE(l.reason.find(l.node == "/conv1/Conv" ? "first" : "last"), std::string::npos) << l.reason;
    } else {
      EXPECT_EQ(l.action, "binarize");
    }
  }
  EXPECT_EQ(skipped, 2);
  // The float weights are gone: fc1 (128 x 1568) and conv2 (32 x 144) shrink about 32x.
  for (const Value& v : b->values())
    if (v.initializer) {
      EXPECT_NE(v.name, "fc1.weight");
    }
  EXPECT_LT(InitBytes(*b), InitBytes(g) / 10) << InitBytes(g) << " -> " << InitBytes(*b);
  // Every weight still counts as a param (one bit each), plus one alpha per output channel.
  EXPECT_EQ(ComputeCost(*b).params, ComputeCost(g).params + 128 + 32);

  const Tensor x = RandomFloat({8, 1, 28, 28}, 4, 0.f, 1.f);
  auto y = RunGraph(*b, x);
  auto yref = RunGraph(*b, x, Backend::kReference);
  auto yd = RunGraph(Decoded(*b, g), x);
  ASSERT_TRUE(y.ok() && yref.ok() && yd.ok()) << y.status().message();
  EXPECT_TRUE(TensorsClose((*y)[0], (*yd)[0], 1e-4f, 1e-4f));
  EXPECT_TRUE(TensorsClose((*yref)[0], (*yd)[0], 1e-4f, 1e-4f));
  // Lowered to standard ONNX: the same outputs, no ai.whittle op left.
  Graph low = *b;
  auto lowered = LowerBinary(low);
  ASSERT_TRUE(lowered.ok()) << lowered.status().message();
  EXPECT_EQ(*lowered, 2);
  EXPECT_EQ(CountOps(low, "BinaryConv") + CountOps(low, "BinaryMatMul"), 0);
  EXPECT_EQ(CountOps(low, "Conv"), 2);
  auto yl = RunGraph(low, x);
  ASSERT_TRUE(yl.ok()) << yl.status().message();
  EXPECT_TRUE(TensorsClose((*yl)[0], (*yd)[0], 1e-4f, 1e-4f));
  // Idempotent: the same layers stay float, nothing is binarized twice.
  PassReport rep2;
  auto again = Binarize(*b, "", &rep2);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(CountOps(*again, "BinaryConv") + CountOps(*again, "BinaryMatMul"), 2);
  for (const LayerReport& l : rep2.layers) EXPECT_NE(l.action, "binarize") << l.node;
  // Save -> load keeps it.
  const std::string path = std::string(WHITTLE_BINARY_DIR) + "/binarize_test_cnn.onnx";
  ASSERT_TRUE(SaveModel(*b, path).ok());
  auto back = LoadModel(path);
  ASSERT_TRUE(back.ok()) << back.status().message();
  auto yb = RunGraph(*back, x);
  ASSERT_TRUE(yb.ok()) << yb.status().message();
  EXPECT_TRUE(TensorsClose((*yb)[0], (*y)[0], 0.f, 0.f));
  std::remove(path.c_str());
}

TEST(BinarizePass, BinaryActivationsMatchTheLoweredModel) {
  const Graph g = LoadCnn();
  for (const std::string spec : {"activations=binary", "activations=binary,include=/conv1/Conv,/fc2/Gemm"}) {
    SCOPED_TRACE(spec);
    auto b = Binarize(g, spec);
    ASSERT_TRUE(b.ok()) << b.status().message();
    const int want = spec.find("include") != std::string::npos ? 4 : 2;
    EXPECT_EQ(CountOps(*b, "BinaryConv") + CountOps(*b, "BinaryMatMul"), want);
    for (const Node& n : b->nodes())
      if (n.domain == kWhittleDomain) {
        EXPECT_EQ(n.attrs.GetString("activations", ""), "binary");
      }
    const Tensor x = RandomFloat({5, 1, 28, 28}, 7, 0.f, 1.f);
    auto y = RunGraph(*b, x);
    auto yref = RunGraph(*b, x, Backend::kReference);
    Graph low = *b;
    auto lowered = LowerBinary(low);
    ASSERT_TRUE(lowered.ok()) << lowered.status().message();
    EXPECT_EQ(*lowered, want);
    EXPECT_EQ(CountOps(low, "Where"), want);
    std::set<std::string> names;  // ONNX Runtime refuses a model with two nodes of one name
    for (const Node& n : low.nodes()) EXPECT_TRUE(names.insert(n.name).second) << "two nodes named " << n.name;
    auto yl = RunGraph(low, x);
    ASSERT_TRUE(y.ok() && yref.ok() && yl.ok()) << y.status().message() << yl.status().message();
    EXPECT_TRUE(TensorsClose((*y)[0], (*yl)[0], 1e-4f, 1e-4f));
    EXPECT_TRUE(TensorsClose((*yref)[0], (*yl)[0], 1e-4f, 1e-4f));
    // Not what the float-activation model computes.
    EXPECT_FALSE(TensorsClose((*y)[0], (*RunGraph(Decoded(*b, g), x))[0], 1e-2f, 1e-2f));
  }
}

TEST(BinarizePass, IncludeExcludeAndLower) {
  const Graph g = LoadCnn();
  auto all = Binarize(g, "include=/conv1/Conv,/fc2/Gemm");
  ASSERT_TRUE(all.ok()) << all.status().message();
  EXPECT_EQ(CountOps(*all, "BinaryConv"), 2);
  EXPECT_EQ(CountOps(*all, "BinaryMatMul"), 2);
  EXPECT_EQ(CountOps(*all, "Gemm") + CountOps(*all, "Conv"), 0);
  const Tensor x = RandomFloat({3, 1, 28, 28}, 9, 0.f, 1.f);
  auto y = RunGraph(*all, x);
  auto yd = RunGraph(Decoded(*all, g), x);
  ASSERT_TRUE(y.ok() && yd.ok());
  EXPECT_TRUE(TensorsClose((*y)[0], (*yd)[0], 1e-4f, 1e-4f));

  auto ex = Binarize(g, "exclude=/fc1/Gemm");
  ASSERT_TRUE(ex.ok()) << ex.status().message();
  EXPECT_EQ(CountOps(*ex, "BinaryConv"), 1);
  EXPECT_EQ(CountOps(*ex, "BinaryMatMul"), 0);
  EXPECT_EQ(CountOps(*ex, "Gemm"), 2);

  // Standard ONNX is compress-model --portable's job (LowerBinary, tested above); the pass's old
  // lower= option says so.
  auto low = Binarize(g, "lower=1");
  ASSERT_FALSE(low.ok());
  EXPECT_NE(low.status().message().find("--portable"), std::string::npos) << low.status().message();
}

TEST(BinarizePass, MatMulGemmLayoutsDepthwiseConvAndOptions) {
  RegisterAllOps();
  AttributeMap nt;  // Gemm without transB, bias [1, N]
  AttributeMap dw;
  dw.Set("group", Attribute::Int(4));
  dw.Set("pads", Attribute::Ints({1, 1, 1, 1}));
  dw.Set("strides", Attribute::Ints({2, 2}));
  Graph g = GraphBuilder(13)
                .Input("x", DType::kFloat32, {Dim::Symbol("batch"), 4, 8, 8})
                .Init("w0", RandomFloat({4, 1, 3, 3}, 1))
                .Init("shape", Tensor::FromVector<int64_t>({2}, {-1, 64}))
                .Init("b1", RandomFloat({64, 70}, 2))
                .Init("c1", RandomFloat({1, 70}, 3))
                .Init("b2", RandomFloat({70, 65}, 4))
                .Init("b3", RandomFloat({65, 3}, 5))
                .Op("Conv", {"x", "w0"}, {"h0"}, dw)
                .Op("Reshape", {"h0", "shape"}, {"h0f"})
                .Op("Gemm", {"h0f", "b1", "c1"}, {"h1"}, nt)
                .Op("MatMul", {"h1", "b2"}, {"h2"})
                .Op("MatMul", {"h2", "b3"}, {"y"})
                .Output("y")
                .Build();
  const char* names[] = {"dw", "reshape", "g1", "m2", "m3"};
  for (size_t i = 0; i < 5; ++i) g.nodes()[i].name = names[i];
  for (const std::string act : {"float", "binary"}) {
    SCOPED_TRACE(act);
    auto b = Binarize(g, "activations=" + act + ",include=dw,m3");
    ASSERT_TRUE(b.ok()) << b.status().message();
    EXPECT_EQ(CountOps(*b, "BinaryConv"), 1);
    EXPECT_EQ(CountOps(*b, "BinaryMatMul"), 3);
    const Tensor x = RandomFloat({3, 4, 8, 8}, 9);
    auto y = RunGraph(*b, x);
    auto yref = RunGraph(*b, x, Backend::kReference);
    Graph low = *b;
    ASSERT_TRUE(LowerBinary(low).ok());
    auto yl = RunGraph(low, x);
    ASSERT_TRUE(y.ok() && yref.ok() && yl.ok()) << y.status().message() << yl.status().message();
    EXPECT_TRUE(TensorsClose((*y)[0], (*yl)[0], 1e-4f, 1e-4f));
    EXPECT_TRUE(TensorsClose((*yref)[0], (*yl)[0], 1e-4f, 1e-4f));
    if (act == "float") {
      auto yd = RunGraph(Decoded(*b, g), x);
      ASSERT_TRUE(yd.ok());
      EXPECT_TRUE(TensorsClose((*y)[0], (*yd)[0], 1e-4f, 1e-4f));
    }
  }
  // alpha is the mean |W| of each output channel; sign(0) = +1.
  Graph z = GraphBuilder(13)
                .Input("x", DType::kFloat32, {Dim::Symbol("batch"), 3})
                .Init("w", Tensor::FromVector<float>({3, 2}, {0.f, -1.f, -2.f, 3.f, 1.f, -5.f}))
                .Op("MatMul", {"x", "w"}, {"y"})
                .Output("y")
                .Build();
  z.nodes()[0].name = "only";
  auto zb = Binarize(z, "include=only");
  ASSERT_TRUE(zb.ok()) << zb.status().message();
  const Node& n = zb->nodes()[0];
  ASSERT_EQ(n.op_type, "BinaryMatMul");
  EXPECT_FLOAT_EQ(zb->ConstInput(n, 2)->data<float>()[0], 1.f);
  EXPECT_FLOAT_EQ(zb->ConstInput(n, 2)->data<float>()[1], 3.f);
  EXPECT_EQ(zb->ConstInput(n, 1)->data<uint64_t>()[0], 0b101u);  // column 0: 0, -2, 1
  EXPECT_EQ(zb->ConstInput(n, 1)->data<uint64_t>()[1], 0b010u);  // column 1: -1, 3, -5

  // Options are checked.
  EXPECT_FALSE(Binarize(g, "activations=ternary").ok());
  EXPECT_FALSE(Binarize(g, "lower=2").ok());
  EXPECT_FALSE(Binarize(g, "bits=2").ok());
  auto e = Binarize(g, "exclude=nope");
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("nope"), std::string::npos) << e.status().message();
  e = Binarize(g, "include=nope");
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("nope"), std::string::npos) << e.status().message();
}

}  // namespace
}  // namespace whittle
