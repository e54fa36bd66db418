// The float runtime rewrites one at a time: constant folding, Conv+BatchNormalization folding
// (the folded session computes what the unfused one does) and activation fusion (what is fused
// and what must be left alone).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "lib/onnx/model_io.h"
#include "lib/ops/op_def.h"
#include "runtime/rewrite/fold_constants.h"
#include "runtime/rewrite/fold_conv_bn.h"
#include "runtime/rewrite/fold_into_conv.h"
#include "runtime/rewrite/fuse_activations.h"
#include "runtime/rewrite/rewrite.h"
#include "runtime/session_internal.h"
#include "tests/util/graph_builder.h"
#include "tests/util/test_util.h"
#include "whittle/session.h"

namespace whittle {
namespace {

using testing::GraphBuilder;
using testing::RandomFloat;

// x -> Conv(w, b) -> BatchNormalization(scale, beta, mean, var) -> [Relu] -> y
Graph ConvBnGraph(bool relu, bool conv_output_too = false) {
  const int64_t cin = 3, cout = 4;
  AttributeMap conv_attrs;
  conv_attrs.Set("pads", Attribute::Ints({1, 1, 1, 1}));
  GraphBuilder gb(13);
  gb.Input("x", DType::kFloat32, {1, cin, 6, 6})
      .Init("w", RandomFloat({cout, cin, 3, 3}, 1))
      .Init("b", RandomFloat({cout}, 2))
      .Init("scale", RandomFloat({cout}, 3, 0.5f, 1.5f))
      .Init("beta", RandomFloat({cout}, 4))
      .Init("mean", RandomFloat({cout}, 5))
      .Init("var", RandomFloat({cout}, 6, 0.2f, 2.f))
      .Op("Conv", {"x", "w", "b"}, {"c"}, conv_attrs)
      .Op("BatchNormalization", {"c", "scale", "beta", "mean", "var"}, {"bn"});
  if (relu) gb.Op("Relu", {"bn"}, {"y"});
  gb.Output(relu ? "y" : "bn");
  if (conv_output_too) gb.Output("c");
  return gb.Build();
}

std::vector<Tensor> RunGraph(const Graph& g, bool optimize) {
  auto s = Session::FromGraph(g, {.backend = Backend::kReference, .optimize = optimize});
  EXPECT_TRUE(s.ok()) << s.status().message();
  if (!s.ok()) return {};
  auto out = (*s)->Run({{"x", RandomFloat({1, 3, 6, 6}, 7)}});
  EXPECT_TRUE(out.ok()) << out.status().message();
  return out.ok() ? *out : std::vector<Tensor>{};
}

TEST(FoldConvBatchNorm, FoldedMatchesUnfused) {
  Graph g = ConvBnGraph(false);
  ASSERT_TRUE(InferShapes(g).ok());
  Graph folded = g;
  int count = 0;
  ASSERT_TRUE(FoldConvBatchNorm(folded, &count).ok());
  EXPECT_EQ(count, 1);
  ASSERT_TRUE(folded.Compact().ok());
  EXPECT_EQ(testing::CountOps(folded, "BatchNormalization"), 0);
  EXPECT_EQ(testing::CountOps(folded, "Conv"), 1);
  std::vector<Tensor> a = RunGraph(folded, false), b = RunGraph(g, false);
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  ASSERT_EQ(a[0].dims(), b[0].dims());
  EXPECT_LT(testing::MaxAbsDiff(a[0], b[0]), 1e-4f);
}

TEST(FoldConvBatchNorm, LeavesSharedConvOutputAlone) {
  Graph g = ConvBnGraph(false, /*conv_output_too=*/true);
  ASSERT_TRUE(InferShapes(g).ok());
  int count = 0;
  ASSERT_TRUE(FoldConvBatchNorm(g, &count).ok());
  EXPECT_EQ(count, 0);
  EXPECT_EQ(testing::CountOps(g, "BatchNormalization"), 1);
}

TEST(FuseActivations, CountsFusedActivations) {
  AttributeMap leaky;
  leaky.Set("alpha", Attribute::Float(0.2f));
  Graph g = GraphBuilder(13)
                .Input("x", DType::kFloat32, {2, 8})
                .Init("w1", RandomFloat({8, 8}, 11))
                .Init("w2", RandomFloat({8, 8}, 12))
                .Init("w3", RandomFloat({8, 8}, 13))
                .Op("MatMul", {"x", "w1"}, {"a"})
                .Op("Relu", {"a"}, {"ra"})
                .Op("MatMul", {"ra", "w2"}, {"b"})
                .Op("LeakyRelu", {"b"}, {"lb"}, leaky)
                .Op("MatMul", {"lb", "w3"}, {"c"})  // c is also a graph output: not fused
                .Op("Sigmoid", {"c"}, {"y"})
                .Output("y")
                .Output("c")
                .Build();
  ASSERT_TRUE(InferShapes(g).ok());
  int count = 0;
  ASSERT_TRUE(FuseActivations(g, &count).ok());
  EXPECT_EQ(count, 2);
  ASSERT_TRUE(g.Compact().ok());
  EXPECT_EQ(testing::CountOps(g, "Relu"), 0);
  EXPECT_EQ(testing::CountOps(g, "LeakyRelu"), 0);
  EXPECT_EQ(testing::CountOps(g, "Sigmoid"), 1);
  int fused = 0;
  for (const Node& n : g.nodes()) fused += n.attrs.Has("_activation");
  EXPECT_EQ(fused, 2);
}

// Every output of g and of h (unoptimized, on `backend`) for input x: the largest difference.
float MaxDiffOfGraphs(const Graph& g, const Graph& h, const Tensor& x, Backend backend = Backend::kReference) {
  SessionOptions plain;
  plain.optimize = false;
  plain.backend = backend;
  auto s0 = Session::FromGraph(g, plain);
  auto s1 = Session::FromGraph(h, plain);
  EXPECT_TRUE(s0.ok() && s1.ok());
  if (!s0.ok() || !s1.ok()) return 1e30f;
  auto y0 = (*s0)->Run({{"x", x}});
  auto y1 = (*s1)->Run({{"x", x}});
  EXPECT_TRUE(y0.ok() && y1.ok() && y0->size() == y1->size());
  if (!y0.ok() || !y1.ok() || y0->size() != y1->size()) return 1e30f;
  float worst = 0.f;
  for (size_t k = 0; k < y0->size(); ++k) worst = std::max(worst, testing::MaxAbsDiff((*y0)[k], (*y1)[k]));
  return worst;
}

// SiLU as the exporters write it (Sigmoid(y) and Mul of y with it, either operand order) fuses
// into the producer as one activation; not when the Sigmoid is read elsewhere too or y is a graph
// output. The fused session computes what the unfused one does.
TEST(FuseActivations, SigmoidMulPairsAreSilu) {
  Graph g = GraphBuilder(13)
                .Input("x", DType::kFloat32, {2, 8})
                .Init("w1", RandomFloat({8, 8}, 11))
                .Init("w2", RandomFloat({8, 8}, 12))
                .Init("w3", RandomFloat({8, 8}, 13))
                .Init("w4", RandomFloat({8, 8}, 14))
                .Op("MatMul", {"x", "w1"}, {"a"})
                .Op("Sigmoid", {"a"}, {"sa"})
                .Op("Mul", {"a", "sa"}, {"ya"})
                .Op("MatMul", {"ya", "w2"}, {"b"})
                .Op("Sigmoid", {"b"}, {"sb"})
                .Op("Mul", {"sb", "b"}, {"yb"})  // the Sigmoid first
                .Op("MatMul", {"yb", "w3"}, {"c"})
                .Op("Sigmoid", {"c"}, {"sc"})
                .Op("Mul", {"c", "sc"}, {"yc"})
                .Op("MatMul", {"yc", "w4"}, {"d"})
                .Op("Add", {"d", "sc"}, {"y"})  // sc read twice: not fused
                .Output("y")
                .Build();
  ASSERT_TRUE(InferShapes(g).ok());
  const Graph original = g;
  int count = 0;
  ASSERT_TRUE(FuseActivations(g, &count).ok());
  EXPECT_EQ(count, 2);
  ASSERT_TRUE(g.Compact().ok());
  EXPECT_EQ(testing::CountOps(g, "Sigmoid"), 1);
  EXPECT_EQ(testing::CountOps(g, "Mul"), 1);
  int silu = 0;
  for (const Node& n : g.nodes()) silu += n.attrs.GetString("_activation", "") == "Silu";
  EXPECT_EQ(silu, 2);
  for (Backend backend : {Backend::kReference, Backend::kCpu})
    EXPECT_LE(MaxDiffOfGraphs(original, g, RandomFloat({2, 8}, 5, -3.f, 3.f), backend), 1e-4f) << BackendName(backend);
  // A graph-output y keeps its Sigmoid and Mul.
  Graph h = GraphBuilder(13)
                .Input("x", DType::kFloat32, {2, 8})
                .Init("w1", RandomFloat({8, 8}, 11))
                .Op("MatMul", {"x", "w1"}, {"a"})
                .Op("Sigmoid", {"a"}, {"sa"})
                .Op("Mul", {"a", "sa"}, {"y"})
                .Output("y")
                .Output("a")
                .Build();
  ASSERT_TRUE(InferShapes(h).ok());
  count = 0;
  ASSERT_TRUE(FuseActivations(h, &count).ok());
  EXPECT_EQ(count, 0);
}

// Paddle2ONNX writes HardSwish as Mul(y, HardSigmoid(y)) with alpha 1/6 and beta 1/2, and puts an
// Identity after its BatchNormalizations and Clips: the Identities go (but the one that is a graph
// output), the pair is one HardSwish, BatchNormalization folds, Clip fuses; another HardSigmoid
// stays a gate.
TEST(FuseActivations, PaddleHardSwishAndIdentitiesFold) {
  AttributeMap hs;
  hs.Set("alpha", Attribute::Float(0.1666667f));
  hs.Set("beta", Attribute::Float(0.5f));
  AttributeMap other;
  other.Set("alpha", Attribute::Float(0.2f));
  AttributeMap pads;
  pads.Set("pads", Attribute::Ints({1, 1, 1, 1}));
  Graph g = GraphBuilder(13)
                .Input("x", DType::kFloat32, {2, 4, 5, 5})
                .Init("w1", RandomFloat({8, 4, 3, 3}, 1))
                .Init("scale", RandomFloat({8}, 2, 0.5f, 1.5f))
                .Init("bias", RandomFloat({8}, 3))
                .Init("mean", RandomFloat({8}, 4))
                .Init("var", RandomFloat({8}, 5, 0.5f, 1.5f))
                .Init("lo", Tensor::Scalar<float>(0.f))
                .Init("hi", Tensor::Scalar<float>(6.f))
                .Init("w2", RandomFloat({8, 8, 3, 3}, 6))
                .Init("w3", RandomFloat({8, 8, 1, 1}, 7))
                .Op("Conv", {"x", "w1"}, {"c1"}, pads)
                .Op("BatchNormalization", {"c1", "scale", "bias", "mean", "var"}, {"bn"})
                .Op("Identity", {"bn"}, {"cast"})
                .Op("Clip", {"cast", "lo", "hi"}, {"r1"})
                .Op("Identity", {"r1"}, {"r1i"})
                .Op("Conv", {"r1i", "w2"}, {"c2"}, pads)
                .Op("HardSigmoid", {"c2"}, {"g2"}, hs)
                .Op("Mul", {"c2", "g2"}, {"a2"})
                .Op("Conv", {"a2", "w3"}, {"c3"})
                .Op("HardSigmoid", {"c3"}, {"g3"}, other)
                .Op("Mul", {"g3", "c3"}, {"a3"})
                .Op("Identity", {"a3"}, {"y"})
                .Output("y")
                .Build();
  ASSERT_TRUE(InferShapes(g).ok());
  Graph h = g;
  auto r = RewriteForRuntime(h);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->skipped_identities, 2);
  EXPECT_EQ(testing::CountOps(h, "Identity"), 1);
  EXPECT_EQ(testing::CountOps(h, "BatchNormalization"), 0);
  EXPECT_EQ(testing::CountOps(h, "Clip"), 0);
  EXPECT_EQ(testing::CountOps(h, "HardSigmoid"), 1);  // the other gate and its Mul stay
  EXPECT_EQ(testing::CountOps(h, "Mul"), 1);
  std::vector<std::string> acts;
  for (const Node& n : h.nodes())
    if (n.op_type == "Conv") acts.push_back(n.attrs.GetString("_activation", ""));
  EXPECT_EQ(acts, (std::vector<std::string>{"Clip", "HardSwish", ""}));
  for (Backend backend : {Backend::kReference, Backend::kCpu})
    EXPECT_LE(MaxDiffOfGraphs(g, h, RandomFloat({2, 4, 5, 5}, 9, -2.f, 2.f), backend), 1e-4f) << BackendName(backend);
}

// PP-LCNetV3 (PaddleOCR's recognizers, as Paddle2ONNX writes them): Conv -> Mul(a) -> Add(b) (a
// learnable scalar affine) -> HardSwish written as Add(y, 3) -> Clip(0, 6) -> Mul(y, ·) -> Div(·, 6),
// on an input whose height and width are free. The affine folds into the conv whatever the dims,
// the five HardSwish nodes become the conv's activation; a Div by another value is left alone.
TEST(FuseActivations, PaddleAffineAndWrittenOutHardSwishFold) {
  AttributeMap pads;
  pads.Set("pads", Attribute::Ints({1, 1, 1, 1}));
  auto build = [&](float div) {
    return GraphBuilder(12)
        .Input("x", DType::kFloat32, SymShape{Dim(2), Dim(4), Dim::Symbol("h"), Dim()})
        .Init("w1", RandomFloat({8, 4, 3, 3}, 1))
        .Init("a", Tensor::FromVector<float>({1}, {1.38f}))
        .Init("b", Tensor::FromVector<float>({1}, {0.58f}))
        .Init("three", Tensor::FromVector<float>({1}, {3.f}))
        .Init("lo", Tensor::Scalar<float>(0.f))
        .Init("hi", Tensor::Scalar<float>(6.f))
        .Init("six", Tensor::FromVector<float>({1}, {div}))
        .Op("Conv", {"x", "w1"}, {"c"}, pads)
        .Op("Mul", {"a", "c"}, {"ca"})
        .Op("Add", {"ca", "b"}, {"cb"})
        .Op("Add", {"cb", "three"}, {"p3"})
        .Op("Clip", {"p3", "lo", "hi"}, {"r6"})
        .Op("Mul", {"cb", "r6"}, {"m"})
        .Op("Div", {"m", "six"}, {"y"})
        .Output("y")
        .Build();
  };
  for (float div : {6.f, 5.f}) {
    SCOPED_TRACE(div);
    Graph g = build(div);
    ASSERT_TRUE(InferShapes(g).ok());
    Graph h = g;
    auto r = RewriteForRuntime(h);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(testing::CountOps(h, "Clip"), div == 6.f ? 0 : 1);
    EXPECT_EQ(testing::CountOps(h, "Div"), div == 6.f ? 0 : 1);
    EXPECT_EQ(testing::CountOps(h, "Add"), div == 6.f ? 0 : 1);  // the affine's folded; the +3 stays with its Clip
    std::string act = "none";
    for (const Node& n : h.nodes())
      if (n.op_type == "Conv") act = n.attrs.GetString("_activation", "");
    EXPECT_EQ(act, div == 6.f ? "HardSwish" : "");
    for (Backend backend : {Backend::kReference, Backend::kCpu})
      EXPECT_LE(MaxDiffOfGraphs(g, h, RandomFloat({2, 4, 5, 7}, 9, -2.f, 2.f), backend), 1e-4f) << BackendName(backend);
  }
}

// The corpus's Keras (tf2onnx) and Paddle (Paddle2ONNX) MobileNets, as the default CPU session
// runs them: no Pad, BatchNormalization, Identity (but the graph output's), Clip or activation
// gate is left outside a conv; the Muls left are the squeeze-excitations'; and they compute what
// the unoptimized graphs do.
// RMS norms as exporters and ONNX Runtime's tools write them: the T5 encoder ORT's optimizer wrote
// (SimplifiedLayerNormalization and SkipSimplifiedLayerNormalization, expanded at load into
// Mul(x, x) -> ReduceMean -> Add -> Sqrt -> Reciprocal -> Mul -> Mul) and a Llama-style decoder
// TorchScript wrote (Pow -> ReduceMean -> Add -> Sqrt -> Div(1, .) -> Mul -> Cast -> Mul, its input
// also read by the residual Add) run as RMSNormalization nodes and compute what the unfused
// graphs do.
TEST(ExportedGraphs, RmsNormsRunAsOneNode) {
  {
    auto loaded = LoadModel(std::string(WHITTLE_SOURCE_DIR) + "/tests/corpus/ort_tools/t5enc_ort_opt.onnx");
    ASSERT_TRUE(loaded.ok()) << loaded.status().message();
    auto s = Session::FromGraph(*loaded);
    ASSERT_TRUE(s.ok()) << s.status().message();
    const Graph& h = SessionGraph(**s);
    EXPECT_EQ(testing::CountOps(h, "RMSNormalization"), 5);
    for (const char* op : {"Sqrt", "Reciprocal", "ReduceMean"}) EXPECT_EQ(testing::CountOps(h, op), 0) << op;
    Tensor ids(DType::kInt64, {2, 7}), mask(DType::kInt64, {2, 7});
    for (int64_t i = 0; i < ids.numel(); ++i) {
      ids.data<int64_t>()[i] = (i * 13 + 5) % 50;
      mask.data<int64_t>()[i] = i % 7 < 6 ? 1 : 0;
    }
    testing::ExpectOptimizedMatchesUnoptimized(*loaded, {{"input_ids", ids}, {"attention_mask", mask}});
  }
  auto loaded = LoadModel(std::string(WHITTLE_SOURCE_DIR) + "/tests/corpus/decoder_tiny_op17.onnx");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  auto s = Session::FromGraph(*loaded);
  ASSERT_TRUE(s.ok()) << s.status().message();
  const Graph& h = SessionGraph(**s);
  EXPECT_EQ(testing::CountOps(h, "RMSNormalization"), 9);  // two per layer and the final norm
  for (const char* op : {"Pow", "Sqrt", "ReduceMean"}) EXPECT_EQ(testing::CountOps(h, op), 0) << op;
}

TEST(ExportedGraphs, KerasAndPaddleMobileNetsRunAsFusedConvs) {
  struct Case {
    const char* file;
    Dims dims;
    int muls, identities;
  } cases[] = {{"keras_mobilenet_tf2onnx_op17.onnx", {2, 32, 32, 3}, 3, 0},
               {"paddle_mobilenet_p2o_op13.onnx", {2, 3, 32, 32}, 1, 1}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.file);
    auto loaded = LoadModel(std::string(WHITTLE_SOURCE_DIR) + "/tests/corpus/" + c.file);
    ASSERT_TRUE(loaded.ok()) << loaded.status().message();
    auto s = Session::FromGraph(*loaded);
    ASSERT_TRUE(s.ok()) << s.status().message();
    const Graph& h = SessionGraph(**s);
    for (const char* op : {"Pad", "BatchNormalization", "Clip", "Sigmoid", "HardSigmoid", "Sub", "Div"})
      EXPECT_EQ(testing::CountOps(h, op), 0) << op;
    EXPECT_EQ(testing::CountOps(h, "Mul"), c.muls);
    EXPECT_EQ(testing::CountOps(h, "Identity"), c.identities);
    const std::string input = loaded->value(loaded->inputs()[0]).name;
    testing::ExpectOptimizedMatchesUnoptimized(*loaded, {{input, RandomFloat(c.dims, 3, -1.f, 1.f)}});
  }
}

// Keras' ZeroPadding2D before a strided conv, as tf2onnx writes it: Pad (bottom and right by one)
// read by two Convs becomes their padding; a Pad with another value, another mode, or a MaxPool
// reader stays.
TEST(FoldPadIntoConv, ZeroPadsBecomeTheConvsPadding) {
  auto pads = [](std::vector<int64_t> v) { return Tensor::FromVector<int64_t>({8}, v); };
  AttributeMap strided;
  strided.Set("strides", Attribute::Ints({2, 2}));
  strided.Set("pads", Attribute::Ints({1, 0, 0, 1}));
  AttributeMap pool;
  pool.Set("kernel_shape", Attribute::Ints({2, 2}));
  Graph g = GraphBuilder(13)
                .Input("x", DType::kFloat32, {2, 4, 7, 7})
                .Init("p", pads({0, 0, 0, 0, 0, 0, 1, 1}))
                .Init("q", pads({0, 0, 1, 1, 0, 0, 1, 1}))
                .Init("one", Tensor::Scalar<float>(1.f))
                .Init("w1", RandomFloat({8, 4, 3, 3}, 1))
                .Init("w2", RandomFloat({8, 4, 1, 1}, 2))
                .Init("w3", RandomFloat({8, 4, 3, 3}, 3))
                .Op("Pad", {"x", "p"}, {"xp"})
                .Op("Conv", {"xp", "w1"}, {"a"}, strided)
                .Op("Conv", {"xp", "w2"}, {"b"})
                .Op("Pad", {"x", "q", "one"}, {"xq"})  // pads with ones: stays
                .Op("Conv", {"xq", "w3"}, {"c"})
                .Op("Pad", {"x", "q"}, {"xm"})  // read by a MaxPool: stays
                .Op("MaxPool", {"xm"}, {"m"}, pool)
                .Op("Conv", {"xm", "w3"}, {"d"})
                .Op("Add", {"a", "a"}, {"y"})
                .Output("y")
                .Output("b")
                .Output("c")
                .Output("m")
                .Output("d")
                .Build();
  ASSERT_TRUE(InferShapes(g).ok());
  Graph h = g;
  int count = 0;
  ASSERT_TRUE(FoldPadIntoConv(h, &count).ok());
  EXPECT_EQ(count, 1);
  EXPECT_EQ(testing::CountOps(h, "Pad"), 2);
  for (const Node& n : h.nodes()) {
    if (n.op_type != "Conv" || h.value(n.inputs[0]).name != "x") continue;
    const std::vector<int64_t> cp = n.attrs.GetInts("pads", {});
    EXPECT_EQ(cp, (n.attrs.Has("strides") ? std::vector<int64_t>{1, 0, 1, 2} : std::vector<int64_t>{0, 0, 1, 1}));
  }
  ASSERT_TRUE(InferShapes(h).ok());
  EXPECT_LE(MaxDiffOfGraphs(g, h, RandomFloat({2, 4, 7, 7}, 9)), 1e-5f);
}

// tf2onnx's depthwise conv with its BatchNormalization left as Mul and Add by per-channel
// constants ([C,1,1], [1,C,1,1]), then a scalar Mul: all fold into the conv; a Mul by [C] (which
// broadcasts along the width, not the channels) does not.
TEST(FoldConvAffine, PerChannelMulAndAddFoldIntoTheConv) {
  AttributeMap dw;
  dw.Set("group", Attribute::Int(6));
  dw.Set("pads", Attribute::Ints({1, 1, 1, 1}));
  Graph g = GraphBuilder(13)
                .Input("x", DType::kFloat32, {2, 6, 6, 6})
                .Init("w", RandomFloat({6, 1, 3, 3}, 1))
                .Init("b", RandomFloat({6}, 2))
                .Init("s", RandomFloat({6, 1, 1}, 3, 0.5f, 2.f))
                .Init("t", RandomFloat({1, 6, 1, 1}, 4))
                .Init("half", Tensor::Scalar<float>(0.5f))
                .Init("row", RandomFloat({6}, 5))
                .Op("Conv", {"x", "w", "b"}, {"c"}, dw)
                .Op("Mul", {"c", "s"}, {"m"})
                .Op("Add", {"t", "m"}, {"a"})
                .Op("Mul", {"a", "half"}, {"h"})
                .Op("Conv", {"h", "w"}, {"c2"}, dw)
                .Op("Mul", {"c2", "row"}, {"y"})
                .Output("y")
                .Build();
  ASSERT_TRUE(InferShapes(g).ok());
  Graph h = g;
  int count = 0;
  ASSERT_TRUE(FoldConvAffine(h, &count).ok());
  EXPECT_EQ(count, 3);
  EXPECT_EQ(testing::CountOps(h, "Mul"), 1);
  EXPECT_EQ(testing::CountOps(h, "Add"), 0);
  ASSERT_TRUE(InferShapes(h).ok());
  EXPECT_LE(MaxDiffOfGraphs(g, h, RandomFloat({2, 6, 6, 6}, 9)), 1e-5f);
}

// An unseeded training-mode Dropout of constants draws a new mask on every run: folding it at
// load would freeze one draw. Seeded, it is the same every run and folds.
TEST(FoldConstants, LeavesUnseededDropoutToRun) {
  for (bool seeded : {false, true}) {
    AttributeMap a;
    if (seeded) a.Set("seed", Attribute::Int(3));
    Graph g = GraphBuilder(13)
                  .Input("x", DType::kFloat32, {4, 64})
                  .Init("w", RandomFloat({4, 64}, 23))
                  .Init("ratio", Tensor::Scalar<float>(0.5f))
                  .Init("train", Tensor::Scalar<bool>(true))
                  .Op("Dropout", {"w", "ratio", "train"}, {"d"}, a)
                  .Op("Add", {"x", "d"}, {"y"})
                  .Output("y")
                  .Build();
    ASSERT_TRUE(InferShapes(g).ok());
    int count = 0;
    ASSERT_TRUE(FoldConstants(g, &count).ok());
    EXPECT_EQ(count, seeded ? 1 : 0);
  }
}

TEST(FoldConstants, FoldsConstantSubgraph) {
  Graph g = GraphBuilder(13)
                .Input("x", DType::kFloat32, {2, 3})
                .Init("a", RandomFloat({2, 3}, 21))
                .Init("b", RandomFloat({2, 3}, 22))
                .Op("Add", {"a", "b"}, {"ab"})
                .Op("Relu", {"ab"}, {"r"})
                .Op("Mul", {"x", "r"}, {"y"})
                .Output("y")
                .Build();
  ASSERT_TRUE(InferShapes(g).ok());
  const Tensor a = *g.value(g.FindValue("a")).initializer, b = *g.value(g.FindValue("b")).initializer;
  int count = 0;
  ASSERT_TRUE(FoldConstants(g, &count).ok());
  EXPECT_EQ(count, 2);
  ASSERT_TRUE(g.Compact().ok());
  ASSERT_EQ(g.nodes().size(), 1u);
  EXPECT_EQ(g.nodes()[0].op_type, "Mul");
  const Tensor* r = g.ConstInput(g.nodes()[0], 1);
  ASSERT_NE(r, nullptr);
  for (int64_t i = 0; i < r->numel(); ++i)
    EXPECT_EQ(r->data<float>()[i], std::max(0.f, a.data<float>()[i] + b.data<float>()[i]));
}

// TorchScript's channel shuffle: x.size(0) (the symbolic batch), x.size(1) // 2 and x.shape[2:]
// (static) feed a Reshape. The static picks fold to constants, the batch's stays; the optimized
// session equals the unoptimized one at two batch sizes.
TEST(FoldConstants, StaticDimsPickedFromAShapeFoldDespiteASymbolicBatch) {
  Graph g = GraphBuilder(15)
                .Input("x", DType::kFloat32, {Dim::Symbol("N"), 6, 4, 5})
                .Init("i0", Tensor::Scalar<int64_t>(0)).Init("i1", Tensor::Scalar<int64_t>(1))
                .Init("two", Tensor::Scalar<int64_t>(2)).Init("ax", Tensor::FromVector<int64_t>({1}, {0}))
                .Init("s2", Tensor::FromVector<int64_t>({1}, {2})).Init("big", Tensor::FromVector<int64_t>({1}, {100}))
                .Init("minus1", Tensor::FromVector<int64_t>({1}, {-1}))
                .Op("Shape", {"x"}, {"shape"})
                .Op("Gather", {"shape", "i0"}, {"n"})
                .Op("Gather", {"shape", "i1"}, {"c"})
                .Op("Div", {"c", "two"}, {"half"})
                .Op("Slice", {"shape", "s2", "big"}, {"hw"})
                .Op("Unsqueeze", {"n", "ax"}, {"n1"})
                .Op("Unsqueeze", {"half", "ax"}, {"half1"})
                .Op("Concat", {"n1", "half1", "minus1", "hw"}, {"target"},
                    [] { AttributeMap a; a.Set("axis", Attribute::Int(0)); return a; }())
                .Op("Reshape", {"x", "target"}, {"y"})
                .Output("y")
                .Build();
  ASSERT_TRUE(InferShapes(g).ok());
  Graph folded = g;
  int count = 0;
  ASSERT_TRUE(FoldConstants(folded, &count).ok());
  ASSERT_TRUE(folded.Compact().ok());
  // Gather(1), Div, Slice and the Unsqueeze of the half fold; Shape, Gather(0) and the rest stay.
  EXPECT_EQ(count, 4);
  EXPECT_EQ(testing::CountOps(folded, "Gather"), 1);
  EXPECT_EQ(testing::CountOps(folded, "Slice"), 0);
  EXPECT_EQ(testing::CountOps(folded, "Div"), 0);
  EXPECT_EQ(testing::CountOps(folded, "Shape"), 1);
  for (int64_t batch : {1, 3}) {
    const Tensor x = RandomFloat({batch, 6, 4, 5}, 31);
    auto a = Session::FromGraph(g, {.backend = Backend::kReference, .optimize = false});
    auto b = Session::FromGraph(g, {.backend = Backend::kReference, .optimize = true});
    ASSERT_TRUE(a.ok() && b.ok());
    auto ya = (*a)->Run({{"x", x}});
    auto yb = (*b)->Run({{"x", x}});
    ASSERT_TRUE(ya.ok() && yb.ok()) << (ya.ok() ? yb.status().message() : ya.status().message());
    EXPECT_EQ((*yb)[0].dims(), (Dims{batch, 3, 2, 4, 5}));
    EXPECT_TRUE(testing::TensorsClose((*ya)[0], (*yb)[0], 0.f, 0.f));
  }
}

// DeepLabV3's ASPP at a small map: dilation 12 on an 8 x 20 input. Every output reads only the
// centre row of the 3 x 3 kernel (the others land in the padding), but all three columns: the
// conv becomes 1 x 3 with pads (0, 12, 0, 12), and computes what the 3 x 3 one did.
TEST(CropDeadConvTaps, KernelRowsThatOnlyReadPaddingAreCut) {
  AttributeMap conv;
  conv.Set("dilations", Attribute::Ints({12, 12}));
  conv.Set("pads", Attribute::Ints({12, 12, 12, 12}));
  conv.Set("kernel_shape", Attribute::Ints({3, 3}));
  Graph g = GraphBuilder(13)
                .Input("x", DType::kFloat32, {Dim::Symbol("N"), 4, 8, 20})
                .Init("w", RandomFloat({6, 4, 3, 3}, 71))
                .Init("b", RandomFloat({6}, 72))
                .Op("Conv", {"x", "w", "b"}, {"y"}, conv)
                .Output("y")
                .Build();
  ASSERT_TRUE(InferShapes(g).ok());
  Graph cut = g;
  int count = 0;
  ASSERT_TRUE(CropDeadConvTaps(cut, &count).ok());
  EXPECT_EQ(count, 1);
  const Node& c = cut.nodes()[0];
  EXPECT_EQ(c.attrs.GetInts("kernel_shape"), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(c.attrs.GetInts("pads"), (std::vector<int64_t>{0, 12, 0, 12}));
  EXPECT_EQ(cut.ConstInput(c, 1)->dims(), (Dims{6, 4, 1, 3}));
  const std::map<std::string, Tensor> in = {{"x", RandomFloat({2, 4, 8, 20}, 73)}};
  auto a = Session::FromGraph(g, {.backend = Backend::kReference, .optimize = false});
  auto b = Session::FromGraph(cut, {.backend = Backend::kReference, .optimize = false});
  ASSERT_TRUE(a.ok() && b.ok());
  auto ya = (*a)->Run(in);
  auto yb = (*b)->Run(in);
  ASSERT_TRUE(ya.ok() && yb.ok());
  EXPECT_TRUE(testing::TensorsClose((*yb)[0], (*ya)[0], 1e-5f, 1e-5f));
  // Dilation 1: every tap reads the input somewhere; nothing to cut.
  Graph dense = GraphBuilder(13)
                    .Input("x", DType::kFloat32, {1, 4, 8, 8})
                    .Init("w", RandomFloat({6, 4, 3, 3}, 74))
                    .Op("Conv", {"x", "w"}, {"y"}, [] { AttributeMap a; a.Set("pads", Attribute::Ints({1, 1, 1, 1})); return a; }())
                    .Output("y")
                    .Build();
  ASSERT_TRUE(InferShapes(dense).ok());
  count = 0;
  ASSERT_TRUE(CropDeadConvTaps(dense, &count).ok());
  EXPECT_EQ(count, 0);
}

TEST(RewriteForRuntime, ReportCountsEachRule) {
  Graph g = ConvBnGraph(true);
  ASSERT_TRUE(InferShapes(g).ok());
  auto r = RewriteForRuntime(g);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->folded_batchnorms, 1);
  EXPECT_EQ(r->fused_activations, 1);
  EXPECT_EQ(r->fused_qdq, 0);
  EXPECT_EQ(g.nodes().size(), 1u);
}

}  // namespace
}  // namespace whittle
