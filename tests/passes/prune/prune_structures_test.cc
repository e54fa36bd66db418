// The pruning pass on small synthetic graphs: units with all-zero incoming weights and bias (dead
// after ReLU) are exactly the ones the criteria remove, so outputs must not change; every
// structure (Gemm chains, Conv+BN, Flatten blocks, depthwise, residual Add, Concat) is rewired and
// re-verified; structures the pass cannot follow are skipped with a reason and left intact.
#include <gtest/gtest.h>

#include <set>

#include "lib/ops/op_def.h"
#include "passes/cost.h"
#include "passes/pass_manager.h"
#include "passes/prune/prune_pass.h"
#include "whittle/session.h"
#include "tests/passes/pass_test_util.h"
#include "tests/util/graph_builder.h"
#include "tests/util/test_util.h"

namespace whittle {
namespace {

using testing::GraphBuilder;
using testing::RandomFloat;

StatusOr<PassReport> Prune(Graph& g, const std::string& spec, const Dataset* calib = nullptr) {
  PassContext ctx;
  ctx.calibration = calib;
  return testing::RunPass(g, "prune", spec, ctx);
}

Tensor RunModel(const Graph& g, const Tensor& x) {
  auto s = Session::FromGraph(g);
  EXPECT_TRUE(s.ok()) << s.status().message();
  if (!s.ok()) return Tensor();
  auto out = (*s)->Run({{"x", x}});
  EXPECT_TRUE(out.ok()) << out.status().message();
  return out.ok() ? (*out)[0] : Tensor();
}

const Tensor& Weight(const Graph& g, const std::string& name) {
  int id = g.FindValue(name);
  WH_CHECK(id >= 0 && g.value(id).initializer);
  return *g.value(id).initializer;
}

// The initializer a node reads at `slot` (names may change when a pass makes a copy).
const Tensor& NodeWeight(const Graph& g, const std::string& node, size_t slot) {
  for (const Node& n : g.nodes())
    if (n.name == node) return *g.value(n.inputs[slot]).initializer;
  WH_CHECK(false);
  return Weight(g, "");
}

const LayerReport* Layer(const PassReport& r, const std::string& node) {
  for (const LayerReport& l : r.layers)
    if (l.node == node) return &l;
  return nullptr;
}

// Zeroes the units `dead` along `axis` of initializer `name` (a fresh tensor: builders own them).
void Kill(Graph& g, const std::string& name, int axis, const std::set<int64_t>& dead) {
  Value& v = g.value(g.FindValue(name));
  Tensor t = v.initializer->Clone();
  int64_t outer = 1, inner = 1, n = t.dim(axis);
  for (int d = 0; d < axis; ++d) outer *= t.dim(d);
  for (int d = axis + 1; d < t.rank(); ++d) inner *= t.dim(d);
  float* p = t.data<float>();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t u : dead)
      for (int64_t i = 0; i < inner; ++i) p[(o * n + u) * inner + i] = 0;
  v.initializer = t;
}

AttributeMap Ints(const std::string& k, std::vector<int64_t> v) {
  AttributeMap a;
  a.Set(k, Attribute::Ints(std::move(v)));
  return a;
}
AttributeMap Int(const std::string& k, int64_t v) {
  AttributeMap a;
  a.Set(k, Attribute::Int(v));
  return a;
}
AttributeMap ConvAttrs(int64_t group = 1) {
  AttributeMap a = Ints("pads", {1, 1, 1, 1});
  a.Set("group", Attribute::Int(group));
  return a;
}

// The per-layer table adds up to the model's change.
void ExpectTableAddsUp(const PassReport& r, const GraphCost& before, const GraphCost& after) {
  int64_t dm = 0, dp = 0;
  for (const LayerReport& l : r.layers) {
    dm += l.macs_before - l.macs_after;
    dp += l.params_before - l.params_after;
  }
  EXPECT_EQ(dm, before.macs - after.macs);
  EXPECT_EQ(dp, before.params - after.params);
}

// x[b,16] -> fc1(32) -> Relu -> fc2(24) -> Relu -> fc3(10), with dead units in fc1 and fc2.
Graph GemmChain(const std::set<int64_t>& dead1, const std::set<int64_t>& dead2) {
  GraphBuilder b;
  b.Input("x", DType::kFloat32, {Dim::Symbol("batch"), 16});
  b.Init("w1", RandomFloat({32, 16}, 1)).Init("b1", RandomFloat({32}, 2));
  b.Init("w2", RandomFloat({24, 32}, 3)).Init("b2", RandomFloat({24}, 4));
  b.Init("w3", RandomFloat({10, 24}, 5)).Init("b3", RandomFloat({10}, 6));
  b.Op("Gemm", {"x", "w1", "b1"}, {"h1"}, Int("transB", 1)).Op("Relu", {"h1"}, {"r1"});
  b.Op("Gemm", {"r1", "w2", "b2"}, {"h2"}, Int("transB", 1)).Op("Relu", {"h2"}, {"r2"});
  b.Op("Gemm", {"r2", "w3", "b3"}, {"y"}, Int("transB", 1)).Output("y");
  Graph g = b.Build();
  g.nodes()[0].name = "fc1";
  g.nodes()[2].name = "fc2";
  g.nodes()[4].name = "fc3";
  Kill(g, "w1", 0, dead1);
  Kill(g, "b1", 0, dead1);
  Kill(g, "w2", 0, dead2);
  Kill(g, "b2", 0, dead2);
  WH_CHECK(InferShapes(g).ok());
  return g;
}

const std::set<int64_t> kDead1 = {1, 4, 5, 9, 15, 20, 27, 31};
const std::set<int64_t> kDead2 = {0, 3, 7, 8, 12, 17, 18, 23};

TEST(PruneGemm, RemovesExactlyTheDeadUnitsForEveryCriterion) {
  for (std::string crit : {"l1", "l2", "activation"}) {
    SCOPED_TRACE(crit);
    Graph g = GemmChain(kDead1, kDead2);
    const Graph original = g;
    Dataset calib;
    calib.inputs = RandomFloat({64, 16}, 9);
    calib.description = "random";
    GraphCost before = ComputeCost(g);
    // 32 -> 24 and 24 -> 18 rounds to 16: 8 units each, exactly the dead ones.
    auto r = Prune(g, "ratio=0.25,criterion=" + crit, &calib);
    ASSERT_TRUE(r.ok()) << r.status().message();
    const Tensor& w1 = NodeWeight(g, "fc1", 1);
    ASSERT_EQ(w1.dims(), (Dims{24, 16}));
    EXPECT_EQ(NodeWeight(g, "fc2", 1).dims(), (Dims{16, 24}));
    EXPECT_EQ(NodeWeight(g, "fc3", 1).dims(), (Dims{10, 16}));
    // The kept rows are the live ones, in order.
    const Tensor& w1_old = Weight(original, "w1");
    int64_t k = 0;
    for (int64_t u = 0; u < 32; ++u) {
      if (kDead1.count(u)) continue;
      EXPECT_EQ(w1.data<float>()[k * 16 + 3], w1_old.data<float>()[u * 16 + 3]) << "unit " << u;
      ++k;
    }
    Tensor x = RandomFloat({5, 16}, 11);
    EXPECT_LE(testing::MaxAbsDiff(RunModel(original, x), RunModel(g, x)), 1e-5f);
    const LayerReport* fc1 = Layer(*r, "fc1");
    ASSERT_NE(fc1, nullptr);
    EXPECT_EQ(fc1->action, "prune");
    EXPECT_EQ(fc1->detail, "kept 24 of 32 units");
    EXPECT_EQ(fc1->setting, 24);
    EXPECT_EQ(fc1->full_setting, 32);
    const LayerReport* fc3 = Layer(*r, "fc3");
    ASSERT_NE(fc3, nullptr);
    EXPECT_EQ(fc3->action, "skipped");
    EXPECT_NE(fc3->reason.find("graph output 'y'"), std::string::npos) << fc3->reason;
    EXPECT_NE(fc3->detail.find("inputs 24 -> 16"), std::string::npos) << fc3->detail;
    ExpectTableAddsUp(*r, before, ComputeCost(g));
  }
}

TEST(PruneGemm, CompensationMakesConstantUnitsExact) {
  // Units with zero weights but bias 1 output the constant 1: removing them is exact only when
  // their mean output moves into the next layer's bias.
  for (int comp : {0, 1}) {
    Graph g = GemmChain({}, {});
    Kill(g, "w1", 0, kDead1);
    Tensor b1 = g.value(g.FindValue("b1")).initializer->Clone();
    for (int64_t u : kDead1) b1.data<float>()[u] = 0.05f;
    g.value(g.FindValue("b1")).initializer = b1;
    const Graph original = g;
    Dataset calib;
    calib.inputs = RandomFloat({32, 16}, 9);
    auto r = Prune(g, "ratio=0.25,layer=fc2:ratio=0,compensate=" + std::to_string(comp), &calib);
    ASSERT_TRUE(r.ok()) << r.status().message();
    ASSERT_EQ(NodeWeight(g, "fc1", 1).dims(), (Dims{24, 16}));
    Tensor x = RandomFloat({5, 16}, 11);
    float diff = testing::MaxAbsDiff(RunModel(original, x), RunModel(g, x));
    if (comp) EXPECT_LE(diff, 1e-5f);
    else EXPECT_GT(diff, 1e-3f);
  }
}

TEST(PruneMatMul, BiasAddIsSlicedAndCompensationAddsAnAdd) {
  GraphBuilder b;
  b.Input("x", DType::kFloat32, {Dim::Symbol("batch"), 16});
  b.Init("w1", RandomFloat({16, 32}, 1)).Init("b1", RandomFloat({32}, 2, 0.1f, 1.f));
  b.Init("w2", RandomFloat({32, 10}, 3));
  b.Op("MatMul", {"x", "w1"}, {"h"}).Op("Add", {"h", "b1"}, {"hb"}).Op("Relu", {"hb"}, {"r"});
  b.Op("MatMul", {"r", "w2"}, {"y"}).Output("y");
  Graph g = b.Build();
  Kill(g, "w1", 1, kDead1);  // columns: constant units relu(b1[u]) > 0
  ASSERT_TRUE(InferShapes(g).ok());
  const Graph original = g;
  Dataset calib;
  calib.inputs = RandomFloat({16, 16}, 9);
  auto r = Prune(g, "ratio=0.25", &calib);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Weight(g, "w1").dims(), (Dims{16, 24}));
  EXPECT_EQ(Weight(g, "b1").dims(), (Dims{24}));
  EXPECT_EQ(Weight(g, "w2").dims(), (Dims{24, 10}));
  int adds = 0;
  for (const Node& n : g.nodes()) adds += n.op_type == "Add";
  EXPECT_EQ(adds, 2);
  Tensor x = RandomFloat({4, 16}, 11);
  EXPECT_LE(testing::MaxAbsDiff(RunModel(original, x), RunModel(g, x)), 1e-5f);
}

// Conv(3->16)+BN+Relu -> Conv(16->8): BN entries and the next conv's input channels follow.
TEST(PruneConv, ConvBatchNormReluConv) {
  const std::set<int64_t> dead = {0, 2, 3, 6, 9, 10, 13, 15};
  GraphBuilder b;
  b.Input("x", DType::kFloat32, {Dim::Symbol("batch"), 3, 8, 8});
  b.Init("w1", RandomFloat({16, 3, 3, 3}, 1)).Init("c1", RandomFloat({16}, 2));
  b.Init("s", RandomFloat({16}, 3, 0.5f, 1.5f)).Init("beta", RandomFloat({16}, 4));
  b.Init("mean", RandomFloat({16}, 5)).Init("var", RandomFloat({16}, 6, 0.5f, 2.f));
  b.Init("w2", RandomFloat({8, 16, 3, 3}, 7)).Init("c2", RandomFloat({8}, 8));
  b.Op("Conv", {"x", "w1", "c1"}, {"a"}, ConvAttrs());
  b.Op("BatchNormalization", {"a", "s", "beta", "mean", "var"}, {"n"});
  b.Op("Relu", {"n"}, {"r"}).Op("Conv", {"r", "w2", "c2"}, {"y"}, ConvAttrs()).Output("y");
  Graph g = b.Build();
  for (const char* t : {"w1", "c1", "beta", "mean"}) Kill(g, t, 0, dead);  // BN(0) = 0
  ASSERT_TRUE(InferShapes(g).ok());
  const Graph original = g;
  GraphCost before = ComputeCost(g);
  auto r = Prune(g, "ratio=0.5");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Weight(g, "w1").dims(), (Dims{8, 3, 3, 3}));
  for (const char* t : {"c1", "s", "beta", "mean", "var"}) EXPECT_EQ(Weight(g, t).dims(), (Dims{8})) << t;
  EXPECT_EQ(Weight(g, "w2").dims(), (Dims{8, 8, 3, 3}));
  Tensor x = RandomFloat({2, 3, 8, 8}, 11);
  EXPECT_LE(testing::MaxAbsDiff(RunModel(original, x), RunModel(g, x)), 1e-5f);
  EXPECT_EQ(Layer(*r, "Conv_0")->detail, "kept 8 of 16 channels");
  ExpectTableAddsUp(*r, before, ComputeCost(g));  // BN params count with the producer
}

TEST(PruneConv, FlattenGivesEachChannelABlockOfColumns) {
  const std::set<int64_t> dead = {1, 2, 5, 7, 8, 11, 12, 14};
  GraphBuilder b;
  b.Input("x", DType::kFloat32, {Dim::Symbol("batch"), 2, 8, 8});
  b.Init("w1", RandomFloat({16, 2, 3, 3}, 1)).Init("c1", RandomFloat({16}, 2));
  b.Init("w2", RandomFloat({10, 256}, 3)).Init("c2", RandomFloat({10}, 4));
  b.Op("Conv", {"x", "w1", "c1"}, {"a"}, ConvAttrs()).Op("Relu", {"a"}, {"r"});
  AttributeMap pool = Ints("kernel_shape", {2, 2});
  pool.Set("strides", Attribute::Ints({2, 2}));
  b.Op("MaxPool", {"r"}, {"p"}, pool).Op("Flatten", {"p"}, {"f"});
  b.Op("Gemm", {"f", "w2", "c2"}, {"y"}, Int("transB", 1)).Output("y");
  Graph g = b.Build();
  Kill(g, "w1", 0, dead);
  Kill(g, "c1", 0, dead);
  ASSERT_TRUE(InferShapes(g).ok());
  const Graph original = g;
  auto r = Prune(g, "ratio=0.5");
  ASSERT_TRUE(r.ok()) << r.status().message();
  const Tensor& w2 = Weight(g, "w2");
  ASSERT_EQ(w2.dims(), (Dims{10, 128}));
  // Channel 3 is the 2nd kept one: its 16 columns moved from [48, 64) to [16, 32).
  EXPECT_EQ(w2.data<float>()[16], Weight(original, "w2").data<float>()[48]);
  Tensor x = RandomFloat({3, 2, 8, 8}, 11);
  EXPECT_LE(testing::MaxAbsDiff(RunModel(original, x), RunModel(g, x)), 1e-5f);
  EXPECT_NE(Layer(*r, "Gemm_4")->detail.find("inputs 256 -> 128"), std::string::npos);
}

// PyTorch's x.view(x.size(0), -1) (Shape -> Gather(0) -> Unsqueeze -> Concat(., [-1]) -> Reshape)
// and Paddle2ONNX's flatten (Shape -> Slice[0:1] -> Concat): each kept channel's positions stay a
// block of the consumer's columns, and the computed target follows the pruned tensor. A shape read
// at the channel axis keeps the conv whole.
TEST(PruneConv, ComputedFlattenTargetsFollow) {
  const std::set<int64_t> dead = {1, 2, 5, 7, 8, 11, 12, 14};
  auto ints = [](std::vector<int64_t> v) { return Tensor::FromVector<int64_t>({static_cast<int64_t>(v.size())}, v); };
  for (int form : {0, 1, 2}) {
    SCOPED_TRACE(form);
    GraphBuilder b(13);
    b.Input("x", DType::kFloat32, {Dim::Symbol("batch"), 2, 4, 4});
    b.Init("w1", RandomFloat({16, 2, 3, 3}, 1)).Init("c1", RandomFloat({16}, 2));
    b.Init("w2", RandomFloat({10, 256}, 3)).Init("c2", RandomFloat({10}, 4));
    b.Init("minus1", ints({-1})).Init("zero", ints({0})).Init("one", ints({1}));
    b.Op("Conv", {"x", "w1", "c1"}, {"a"}, ConvAttrs()).Op("Relu", {"a"}, {"r"}).Op("Shape", {"r"}, {"s"});
    if (form == 0) {
      b.Init("i0", Tensor::Scalar<int64_t>(0));
      b.Op("Gather", {"s", "i0"}, {"n"}).Op("Unsqueeze", {"n", "zero"}, {"lead"});
    } else if (form == 1) {
      b.Op("Slice", {"s", "zero", "one", "zero"}, {"lead"});
    } else {  // reads the channel count: not followed
      b.Init("i1", Tensor::FromVector<int64_t>({1}, {1}));
      b.Op("Gather", {"s", "i1"}, {"lead"});
    }
    AttributeMap cat;
    cat.Set("axis", Attribute::Int(0));
    b.Op("Concat", {"lead", "minus1"}, {"shape"}, cat).Op("Reshape", {"r", "shape"}, {"f"});
    b.Op("Gemm", {"f", "w2", "c2"}, {"y"}, Int("transB", 1)).Output("y");
    Graph g = b.Build();
    Kill(g, "w1", 0, dead);
    Kill(g, "c1", 0, dead);
    ASSERT_TRUE(InferShapes(g).ok());
    const Graph original = g;
    auto r = Prune(g, "ratio=0.5");
    ASSERT_TRUE(r.ok()) << r.status().message();
    if (form == 2) {
      EXPECT_EQ(Weight(g, "w2").dims(), (Dims{10, 256}));
      EXPECT_NE(Layer(*r, "Conv_0")->reason.find("its shape is read beyond"), std::string::npos) << Layer(*r, "Conv_0")->reason;
      continue;
    }
    EXPECT_EQ(Weight(g, "w2").dims(), (Dims{10, 128}));
    Tensor x = RandomFloat({3, 2, 4, 4}, 11);
    EXPECT_LE(testing::MaxAbsDiff(RunModel(original, x), RunModel(g, x)), 1e-5f);
  }
}

TEST(PruneConv, ChannelConstantsAndGlobalPoolFollow) {
  // Conv -> Mul(per-channel [16,1,1]) -> LeakyRelu -> GlobalAveragePool -> Flatten -> Gemm.
  const std::set<int64_t> dead = {0, 1, 2, 3, 8, 9, 10, 11};
  GraphBuilder b;
  b.Input("x", DType::kFloat32, {Dim::Symbol("batch"), 2, 5, 5});
  b.Init("w1", RandomFloat({16, 2, 3, 3}, 1)).Init("k", RandomFloat({16, 1, 1}, 2));
  b.Init("w2", RandomFloat({16, 6}, 3));
  b.Op("Conv", {"x", "w1"}, {"a"}, ConvAttrs()).Op("Mul", {"a", "k"}, {"m"}).Op("LeakyRelu", {"m"}, {"r"});
  b.Op("GlobalAveragePool", {"r"}, {"p"}).Op("Flatten", {"p"}, {"f"}).Op("Gemm", {"f", "w2"}, {"y"}).Output("y");
  Graph g = b.Build();
  Kill(g, "w1", 0, dead);
  ASSERT_TRUE(InferShapes(g).ok());
  const Graph original = g;
  GraphCost before = ComputeCost(g);
  auto r = Prune(g, "ratio=0.5");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Weight(g, "k").dims(), (Dims{8, 1, 1}));
  EXPECT_EQ(Weight(g, "w2").dims(), (Dims{8, 6}));
  Tensor x = RandomFloat({3, 2, 5, 5}, 11);
  EXPECT_LE(testing::MaxAbsDiff(RunModel(original, x), RunModel(g, x)), 1e-5f);
  ExpectTableAddsUp(*r, before, ComputeCost(g));
}

// As torch.onnx's dynamo exporter writes a classifier head: ReduceMean over [-1, -2] (axes an
// input, opset 18) and Reshape to [-1, C] (allowzero=1), after a spatial Pad; and the other axis forms: ReduceMax with
// an axes attribute and keepdims=0, Unsqueeze/Squeeze of the batch axis, ReduceSum (opset 13).
TEST(PruneConv, ReducesSqueezesAndFlatteningReshapesFollow) {
  const std::set<int64_t> dead = {0, 1, 2, 3, 8, 9, 10, 11};
  auto axes = [](std::vector<int64_t> v) { return Tensor::FromVector<int64_t>({static_cast<int64_t>(v.size())}, v); };
  for (int form : {0, 1}) {
    SCOPED_TRACE(form);
    GraphBuilder b(form == 0 ? 18 : 13);
    b.Input("x", DType::kFloat32, {Dim::Symbol("batch"), 2, 5, 5});
    b.Init("w1", RandomFloat({16, 2, 3, 3}, 1)).Init("w2", RandomFloat({16, 6}, 3));
    b.Op("Conv", {"x", "w1"}, {"a"}, ConvAttrs()).Op("Relu", {"a"}, {"r"});
    if (form == 0) {
      // Keras' ZeroPadding2D first (Pad of the spatial dims only).
      b.Init("hw", axes({-1, -2})).Init("shape", axes({-1, 16})).Init("pads", axes({0, 0, 0, 0, 0, 0, 1, 1}));
      b.Op("Pad", {"r", "pads"}, {"rp"});
      b.Op("ReduceMean", {"rp", "hw"}, {"m"}).Op("Reshape", {"m", "shape"}, {"f"}, Int("allowzero", 1));
    } else {
      AttributeMap rm = Ints("axes", {3});
      rm.Set("keepdims", Attribute::Int(0));
      b.Init("zero", axes({0})).Init("two", axes({2}));
      b.Op("ReduceMax", {"r"}, {"m"}, rm).Op("Unsqueeze", {"m", "zero"}, {"u"}).Op("Squeeze", {"u", "zero"}, {"s"});
      b.Op("ReduceSum", {"s", "two"}, {"f"}, Int("keepdims", 0));
    }
    b.Op("Gemm", {"f", "w2"}, {"y"}).Output("y");
    Graph g = b.Build();
    Kill(g, "w1", 0, dead);
    ASSERT_TRUE(InferShapes(g).ok());
    const Graph original = g;
    GraphCost before = ComputeCost(g);
    auto r = Prune(g, "ratio=0.5");
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(Weight(g, "w1").dims(), (Dims{8, 2, 3, 3}));
    EXPECT_EQ(Weight(g, "w2").dims(), (Dims{8, 6}));
    if (form == 0) {
      const Tensor& shape = NodeWeight(g, "Reshape_4", 1);
      EXPECT_EQ(std::vector<int64_t>(shape.data<int64_t>(), shape.data<int64_t>() + 2), (std::vector<int64_t>{-1, 8}));
    }
    Tensor x = RandomFloat({3, 2, 5, 5}, 11);
    EXPECT_LE(testing::MaxAbsDiff(RunModel(original, x), RunModel(g, x)), 1e-5f);
    ExpectTableAddsUp(*r, before, ComputeCost(g));
  }
}

// A Reduce across the channels, or a Reshape that splits them, leaves the conv whole with the reason.
TEST(PruneSkips, ReducesAcrossChannelsAndChannelSplittingReshapes) {
  for (int form : {0, 1}) {
    SCOPED_TRACE(form);
    GraphBuilder b(18);
    b.Input("x", DType::kFloat32, {Dim::Symbol("batch"), 2, 5, 5});
    b.Init("w1", RandomFloat({16, 2, 3, 3}, 1)).Init("w2", RandomFloat({16, 4, 1, 1}, 2));
    b.Op("Conv", {"x", "w1"}, {"a"}, ConvAttrs()).Op("Relu", {"a"}, {"r"});
    if (form == 0) {
      b.Init("c", Tensor::FromVector<int64_t>({1}, {1}));
      b.Op("ReduceMean", {"r", "c"}, {"y"});
    } else {
      b.Init("shape", Tensor::FromVector<int64_t>({3}, {-1, 8, 50}));
      b.Op("Reshape", {"r", "shape"}, {"y"});
    }
    b.Output("y");
    Graph g = b.Build();
    ASSERT_TRUE(InferShapes(g).ok());
    auto r = Prune(g, "ratio=0.5");
    ASSERT_TRUE(r.ok()) << r.status().message();
    const LayerReport* l = Layer(*r, "Conv_0");
    ASSERT_NE(l, nullptr);
    EXPECT_EQ(l->action, "skipped");
    EXPECT_NE(l->reason.find(form == 0 ? "reduces across the channels" : "reshapes the channels"), std::string::npos)
        << l->reason;
    EXPECT_EQ(Weight(g, "w1").dims(), (Dims{16, 2, 3, 3}));
  }
}

TEST(PruneConv, DepthwiseConvFollowsItsInput) {
  // mult 1: Conv(3->16) -> Relu -> DW(16, group 16) -> Relu -> Conv(16->4);
  // mult 2: Conv(3->8)  -> Relu -> DW(8->16, group 8) -> Relu -> Conv(16->4).
  for (int64_t mult : {1, 2}) {
    SCOPED_TRACE(mult);
    const int64_t c = 16 / mult;
    const std::set<int64_t> dead = mult == 1 ? std::set<int64_t>{0, 1, 4, 6, 9, 11, 12, 14} : std::set<int64_t>{1, 2, 4, 7};
    GraphBuilder b;
    b.Input("x", DType::kFloat32, {Dim::Symbol("batch"), 3, 6, 6});
    b.Init("w1", RandomFloat({c, 3, 3, 3}, 1)).Init("c1", RandomFloat({c}, 2));
    b.Init("wd", RandomFloat({16, 1, 3, 3}, 3)).Init("cd", RandomFloat({16}, 4));
    b.Init("w2", RandomFloat({4, 16, 1, 1}, 5));
    b.Op("Conv", {"x", "w1", "c1"}, {"a"}, ConvAttrs()).Op("Relu", {"a"}, {"r"});
    b.Op("Conv", {"r", "wd", "cd"}, {"d"}, ConvAttrs(c)).Op("Relu", {"d"}, {"rd"});
    b.Op("Conv", {"rd", "w2"}, {"y"}).Output("y");
    Graph g = b.Build();
    Kill(g, "w1", 0, dead);
    Kill(g, "c1", 0, dead);
    std::set<int64_t> dead_dw;
    for (int64_t u : dead)
      for (int64_t j = 0; j < mult; ++j) dead_dw.insert(u * mult + j);
    Kill(g, "cd", 0, dead_dw);  // a dead input channel gives relu(0) = 0
    ASSERT_TRUE(InferShapes(g).ok());
    const Graph original = g;
    GraphCost before = ComputeCost(g);
    auto r = Prune(g, "ratio=0.5,round=" + std::to_string(8 / mult));
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(Weight(g, "w1").dims(), (Dims{c / 2, 3, 3, 3}));
    EXPECT_EQ(Weight(g, "wd").dims(), (Dims{8, 1, 3, 3}));
    EXPECT_EQ(Weight(g, "cd").dims(), (Dims{8}));
    EXPECT_EQ(Weight(g, "w2").dims(), (Dims{4, 8, 1, 1}));
    EXPECT_EQ(g.nodes()[2].attrs.GetInt("group", 0), c / 2);
    Tensor x = RandomFloat({2, 3, 6, 6}, 11);
    EXPECT_LE(testing::MaxAbsDiff(RunModel(original, x), RunModel(g, x)), 1e-5f);
    EXPECT_EQ(Layer(*r, "Conv_2")->action, "prune");
    ExpectTableAddsUp(*r, before, ComputeCost(g));
  }
}

TEST(PruneConv, ResidualAddPrunesBothProducersWithOneMask) {
  // r = relu(conv_a(x)); y = conv_c(relu(conv_b(r) + r)): conv_a and conv_b are one group, and
  // conv_b loses input and output channels by the same mask.
  const std::set<int64_t> dead = {2, 3, 5, 8, 9, 10, 12, 15};
  GraphBuilder b;
  b.Input("x", DType::kFloat32, {Dim::Symbol("batch"), 3, 6, 6});
  // Small weights keep activations O(1), so float rounding stays below the 1e-5 bound.
  b.Init("wa", RandomFloat({16, 3, 3, 3}, 1, -.3f, .3f)).Init("ca", RandomFloat({16}, 2));
  b.Init("wb", RandomFloat({16, 16, 3, 3}, 3, -.3f, .3f)).Init("cb", RandomFloat({16}, 4));
  b.Init("wc", RandomFloat({4, 16, 3, 3}, 5, -.3f, .3f));
  b.Op("Conv", {"x", "wa", "ca"}, {"a"}, ConvAttrs()).Op("Relu", {"a"}, {"r"});
  b.Op("Conv", {"r", "wb", "cb"}, {"bb"}, ConvAttrs()).Op("Add", {"bb", "r"}, {"s"}).Op("Relu", {"s"}, {"rs"});
  b.Op("Conv", {"rs", "wc"}, {"y"}, ConvAttrs()).Output("y");
  Graph g = b.Build();
  g.nodes()[0].name = "conv_a";
  g.nodes()[2].name = "conv_b";
  for (const char* t : {"wa", "ca", "wb", "cb"}) Kill(g, t, 0, dead);
  // A channel dead in conv_a but alive in conv_b must be kept (scores are summed).
  Kill(g, "wa", 0, {0});
  Kill(g, "ca", 0, {0});
  ASSERT_TRUE(InferShapes(g).ok());
  const Graph original = g;
  GraphCost before = ComputeCost(g);
  auto r = Prune(g, "ratio=0.5");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Weight(g, "wa").dims(), (Dims{8, 3, 3, 3}));
  EXPECT_EQ(Weight(g, "wb").dims(), (Dims{8, 8, 3, 3}));
  EXPECT_EQ(Weight(g, "wc").dims(), (Dims{4, 8, 3, 3}));
  Tensor x = RandomFloat({2, 3, 6, 6}, 11);
  EXPECT_LE(testing::MaxAbsDiff(RunModel(original, x), RunModel(g, x)), 1e-5f);
  const LayerReport* la = Layer(*r, "conv_a");
  EXPECT_EQ(la->action, "prune");
  EXPECT_NE(la->detail.find("coupled with 'conv_b'"), std::string::npos) << la->detail;
  ExpectTableAddsUp(*r, before, ComputeCost(g));
}

TEST(PruneConv, ConcatKeepsEachBranchMaskAndRemapsOffsets) {
  GraphBuilder b;
  b.Input("x", DType::kFloat32, {Dim::Symbol("batch"), 3, 6, 6});
  b.Init("wa", RandomFloat({8, 3, 3, 3}, 1)).Init("wb", RandomFloat({16, 3, 3, 3}, 2));
  b.Init("wc", RandomFloat({4, 24, 3, 3}, 3)).Init("cc", RandomFloat({4}, 4));
  b.Op("Conv", {"x", "wa"}, {"a"}, ConvAttrs()).Op("Relu", {"a"}, {"ra"});
  b.Op("Conv", {"x", "wb"}, {"bb"}, ConvAttrs()).Op("Relu", {"bb"}, {"rb"});
  b.Op("Concat", {"ra", "rb"}, {"cat"}, Int("axis", 1));
  b.Op("Conv", {"cat", "wc", "cc"}, {"y"}, ConvAttrs()).Output("y");
  Graph g = b.Build();
  Kill(g, "wa", 0, {3, 6});
  Kill(g, "wb", 0, {0, 5, 6, 13});
  ASSERT_TRUE(InferShapes(g).ok());
  const Graph original = g;
  auto r = Prune(g, "ratio=0.25,round=1");  // 8 -> 6 and 16 -> 12
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Weight(g, "wa").dims(), (Dims{6, 3, 3, 3}));
  EXPECT_EQ(Weight(g, "wb").dims(), (Dims{12, 3, 3, 3}));
  EXPECT_EQ(Weight(g, "wc").dims(), (Dims{4, 18, 3, 3}));
  Tensor x = RandomFloat({2, 3, 6, 6}, 11);
  EXPECT_LE(testing::MaxAbsDiff(RunModel(original, x), RunModel(g, x)), 1e-5f);
}

// Graphs the pass must leave alone, each with the reason it gives.
TEST(PruneSkips, UnfollowableStructuresKeepTheGraphIntact) {
  struct Case {
    std::string name, expect;
    Graph g;
  };
  std::vector<Case> cases;
  {
    GraphBuilder b;  // hidden units reshaped
    b.Input("x", DType::kFloat32, {2, 16});
    b.Init("w1", RandomFloat({16, 32}, 1)).Init("shape", Tensor::FromVector<int64_t>({3}, {2, 4, 8}));
    b.Op("MatMul", {"x", "w1"}, {"h"}).Op("Relu", {"h"}, {"r"}).Op("Reshape", {"r", "shape"}, {"y"}).Output("y");
    cases.push_back({"reshape", "Reshape", b.Build()});
  }
  {
    GraphBuilder b;  // grouped conv reads the channels
    b.Input("x", DType::kFloat32, {1, 3, 6, 6});
    b.Init("w1", RandomFloat({16, 3, 3, 3}, 1)).Init("w2", RandomFloat({8, 8, 3, 3}, 2));
    b.Op("Conv", {"x", "w1"}, {"a"}, ConvAttrs()).Op("Relu", {"a"}, {"r"});
    b.Op("Conv", {"r", "w2"}, {"y"}, ConvAttrs(2)).Output("y");
    cases.push_back({"grouped", "grouped conv (group=2)", b.Build()});
  }
  {
    GraphBuilder b;  // the hidden activation is also a graph output
    b.Input("x", DType::kFloat32, {2, 16});
    b.Init("w1", RandomFloat({16, 32}, 1)).Init("w2", RandomFloat({32, 4}, 2));
    b.Op("MatMul", {"x", "w1"}, {"h"}).Op("Relu", {"h"}, {"r"}).Op("MatMul", {"r", "w2"}, {"y"});
    b.Output("y").Output("r");
    cases.push_back({"output", "graph output 'r'", b.Build()});
  }
  {
    GraphBuilder b;  // softmax across the units
    b.Input("x", DType::kFloat32, {2, 16});
    b.Init("w1", RandomFloat({16, 32}, 1)).Init("w2", RandomFloat({32, 4}, 2));
    b.Op("MatMul", {"x", "w1"}, {"h"}).Op("Softmax", {"h"}, {"r"}).Op("MatMul", {"r", "w2"}, {"y"}).Output("y");
    cases.push_back({"softmax", "normalizes across the channels", b.Build()});
  }
  for (Case& c : cases) {
    SCOPED_TRACE(c.name);
    ASSERT_TRUE(InferShapes(c.g).ok());
    const Graph original = c.g;
    auto r = Prune(c.g, "ratio=0.5");
    ASSERT_TRUE(r.ok()) << r.status().message();
    const LayerReport& first = r->layers.at(0);
    EXPECT_EQ(first.action, "skipped");
    EXPECT_NE(first.reason.find(c.expect), std::string::npos) << first.reason;
    EXPECT_EQ(ComputeCost(c.g).params, ComputeCost(original).params);
    const std::vector<int64_t> shape = ToDims(*original.value(original.inputs()[0]).shape).value();
    Tensor x = RandomFloat(shape, 3);
    EXPECT_LE(testing::MaxAbsDiff(RunModel(original, x), RunModel(c.g, x)), 0.f);
  }
}

TEST(PruneRounding, NearestMultipleNeverZeroNeverMore) {
  struct Case {
    int64_t width;
    std::string spec;
    int64_t kept;  // 0: skipped, nothing to remove
  };
  for (const Case& c : std::vector<Case>{{40, "ratio=0.3", 32},       // 28 -> nearest 8: 32 (tie up)
                                         {40, "ratio=0.3,round=1", 28},
                                         {40, "ratio=0.45", 24},      // 22 -> 24
                                         {40, "ratio=0.95", 8},       // 2 -> never below one step
                                         {6, "ratio=0.3", 0},         // narrower than a step: left alone
                                         {40, "ratio=0", 0},
                                         {12, "ratio=0.1", 8}}) {     // 10.8 -> 8
    SCOPED_TRACE(c.spec + " width " + std::to_string(c.width));
    GraphBuilder b;
    b.Input("x", DType::kFloat32, {2, 16});
    b.Init("w1", RandomFloat({16, c.width}, 1)).Init("w2", RandomFloat({c.width, 4}, 2));
    b.Op("MatMul", {"x", "w1"}, {"h"}).Op("Relu", {"h"}, {"r"}).Op("MatMul", {"r", "w2"}, {"y"}).Output("y");
    Graph g = b.Build();
    ASSERT_TRUE(InferShapes(g).ok());
    auto r = Prune(g, c.spec);
    ASSERT_TRUE(r.ok()) << r.status().message();
    const LayerReport& l = r->layers.at(0);
    if (c.kept == 0) {
      EXPECT_EQ(l.action, "skipped");
      EXPECT_NE(l.reason.find("nothing to remove"), std::string::npos) << l.reason;
      EXPECT_EQ(Weight(g, "w1").dims(), (Dims{16, c.width}));
    } else {
      EXPECT_EQ(l.action, "prune");
      EXPECT_EQ(Weight(g, "w1").dims(), (Dims{16, c.kept}));
    }
  }
}

}  // namespace
}  // namespace whittle
