// The blocked channel layout (runtime/rewrite/nchwc.h, ops lib/ops/nchwc.cc, kernels
// kernels/nchwc_kernels.cc): a small residual CNN as exporters write it (a one-channel stem conv,
// max and average pools with padding, a strided conv, a residual Add, a global pool, Flatten,
// Gemm) is converted for every block (8, 16 and 0 = NHWC), and runs on the reference and the CPU
// kernels with the outputs of the unconverted graph; the default CPU session converts it and reuses
// its plan across batch sizes.
#include "runtime/rewrite/nchwc.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include "kernels/nchwc.h"
#include "lib/ir/binary_format.h"
#include "lib/ops/op_def.h"
#include "runtime/rewrite/rewrite.h"
#include "runtime/session_internal.h"
#include "tests/util/graph_builder.h"
#include "tests/util/test_util.h"
#include "whittle/session.h"

namespace whittle {
namespace {

using testing::GraphBuilder;
using testing::RandomFloat;

AttributeMap A(std::vector<std::pair<std::string, Attribute>> kv) {
  AttributeMap m;
  for (auto& [k, v] : kv) m.Set(k, v);
  return m;
}

// x [batch, 1, 12, 12] -> stem Conv(1->16)+Relu -> MaxPool 2x2 -> Conv(16->16)+Relu -> Conv(16->16)
// -> Add(., pooled) -> Relu -> AveragePool 3x3 pad 1 (count_include_pad) -> Conv(16->32, stride 2)
// -> MaxPool 3x3 pad 1 ceil -> GlobalAveragePool -> Flatten -> Gemm -> y [batch, 5]; the pooled
// tensor is also a graph output (read outside the region).
Graph SmallResNet() {
  auto pads1 = Attribute::Ints({1, 1, 1, 1});
  return GraphBuilder(17)
      .Input("x", DType::kFloat32, {Dim::Symbol("batch"), 1, 12, 12})
      .Init("w0", RandomFloat({16, 1, 3, 3}, 1, -0.5f, 0.5f))
      .Init("b0", RandomFloat({16}, 2))
      .Init("w1", RandomFloat({16, 16, 3, 3}, 3, -0.2f, 0.2f))
      .Init("b1", RandomFloat({16}, 4))
      .Init("w2", RandomFloat({16, 16, 3, 3}, 5, -0.2f, 0.2f))
      .Init("w3", RandomFloat({32, 16, 3, 3}, 6, -0.2f, 0.2f))
      .Init("b3", RandomFloat({32}, 7))
      .Init("fc", RandomFloat({32, 5}, 8))
      .Op("Conv", {"x", "w0", "b0"}, {"c0"}, A({{"pads", pads1}}))
      .Op("Relu", {"c0"}, {"r0"})
      .Op("MaxPool", {"r0"}, {"p0"}, A({{"kernel_shape", Attribute::Ints({2, 2})}, {"strides", Attribute::Ints({2, 2})}}))
      .Op("Conv", {"p0", "w1", "b1"}, {"c1"}, A({{"pads", pads1}}))
      .Op("Relu", {"c1"}, {"r1"})
      .Op("Conv", {"r1", "w2"}, {"c2"}, A({{"pads", pads1}}))
      .Op("Add", {"c2", "p0"}, {"s"})
      .Op("Relu", {"s"}, {"r2"})
      .Op("AveragePool", {"r2"}, {"a"},
          A({{"kernel_shape", Attribute::Ints({3, 3})}, {"pads", pads1}, {"count_include_pad", Attribute::Int(1)}}))
      .Op("Conv", {"a", "w3", "b3"}, {"c3"}, A({{"pads", pads1}, {"strides", Attribute::Ints({2, 2})}}))
      .Op("MaxPool", {"c3"}, {"m"},
          A({{"kernel_shape", Attribute::Ints({3, 3})}, {"pads", pads1}, {"strides", Attribute::Ints({2, 2})},
             {"ceil_mode", Attribute::Int(1)}}))
      .Op("GlobalAveragePool", {"m"}, {"g"})
      .Op("Flatten", {"g"}, {"f"})
      .Op("MatMul", {"f", "fc"}, {"y"})
      .Output("y")
      .Output("p0")
      .Build();
}

// The runtime's rewrites on g as Session::FromGraph runs them (after shape inference), with the
// given NCHWc block.
StatusOr<RewriteReport> Rewrite(Graph& g, int block) {
  RegisterAllOps();
  WH_RETURN_IF_ERROR(InferShapes(g));
  return RewriteForRuntime(g, block);
}

std::vector<Tensor> RunGraph(const Graph& g, const SessionOptions& so, const Tensor& x) {
  auto s = Session::FromGraph(g, so);
  EXPECT_TRUE(s.ok()) << s.status().message();
  if (!s.ok()) return {};
  auto out = (*s)->Run({{"x", x}});
  EXPECT_TRUE(out.ok()) << out.status().message();
  return out.ok() ? *out : std::vector<Tensor>{};
}

void ExpectClose(const std::vector<Tensor>& got, const std::vector<Tensor>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].dims(), want[i].dims()) << "output " << i;
    for (int64_t j = 0; j < got[i].numel(); ++j) {
      const float e = want[i].data<float>()[j];
      ASSERT_NEAR(got[i].data<float>()[j], e, 1e-4f + 1e-4f * std::fabs(e)) << "output " << i << " element " << j;
    }
  }
}

// The rewritten g, unoptimized, on the reference and the CPU kernels with 1 and 2 threads.
void ExpectCloseOnEveryBackend(const Graph& g, const Tensor& x, const std::vector<Tensor>& want) {
  for (Backend backend : {Backend::kReference, Backend::kCpu}) {
    SCOPED_TRACE(BackendName(backend));
    for (int threads : {1, 2}) {
      SessionOptions so;
      so.backend = backend;
      so.optimize = false;
      so.num_threads = threads;
      ExpectClose(RunGraph(g, so, x), want);
    }
  }
}

std::vector<Tensor> Unconverted(const Tensor& x) {
  SessionOptions ref;
  ref.backend = Backend::kReference;
  ref.optimize = false;
  return RunGraph(SmallResNet(), ref, x);
}

TEST(Nchwc, EveryBlockConvertsTheRegionAndMatchesOnEveryBackend) {
  const Tensor x = RandomFloat({3, 1, 12, 12}, 20);
  const std::vector<Tensor> want = Unconverted(x);
  for (int block : {0, 8, 16}) {
    SCOPED_TRACE("block " + std::to_string(block));
    Graph g = SmallResNet();
    auto r = Rewrite(g, block);
    ASSERT_TRUE(r.ok()) << r.status().message();
    // Four convs, three pools and the global pool run blocked; the residual Add went into the conv
    // before it; the pooled output and the pooled features come back through FromNchwc.
    EXPECT_EQ(testing::CountOps(g, "NchwcConv"), 4);
    EXPECT_EQ(testing::CountOps(g, "NchwcPool"), 4);
    EXPECT_EQ(testing::CountOps(g, "Conv"), 0);
    EXPECT_EQ(testing::CountOps(g, "Add"), 0);
    EXPECT_EQ(testing::CountOps(g, "FromNchwc"), 2);
    // The stem reads the plain input: oneDNN's first-layer kernels take NCHW (for block 0 through
    // the 16-channel output being nChw16c too), so no ToNchwc.
    EXPECT_EQ(testing::CountOps(g, "ToNchwc"), 0);
    EXPECT_EQ(r->nchwc_nodes, 8);
    for (Backend backend : {Backend::kReference, Backend::kCpu}) {
      SCOPED_TRACE(BackendName(backend));
      SessionOptions so;
      so.backend = backend;
      so.optimize = false;  // g is rewritten already
      so.num_threads = 2;
      ExpectClose(RunGraph(g, so, x), want);
    }
  }
}

TEST(Nchwc, DefaultCpuSessionUsesThePreferredLayoutAcrossBatchSizes) {
  const std::optional<int> block = NchwcBlock(Backend::kCpu);
  if (!block) GTEST_SKIP() << "oneDNN prefers no blocked layout on this CPU";
  SessionOptions so;
  so.num_threads = 2;
  auto s = Session::FromGraph(SmallResNet(), so);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(testing::CountOps(SessionGraph(**s), "NchwcConv"), 4);
  for (int64_t batch : {1, 4, 1}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    const Tensor x = RandomFloat({batch, 1, 12, 12}, static_cast<uint32_t>(30 + batch));
    auto out = (*s)->Run({{"x", x}});
    ASSERT_TRUE(out.ok()) << out.status().message();
    ExpectClose(*out, Unconverted(x));
  }
  SessionOptions nchw = so;
  nchw.blocked_layout = false;
  auto plain = Session::FromGraph(SmallResNet(), nchw);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(testing::CountOps(SessionGraph(**plain), "NchwcConv"), 0);
}

// Convs the layout does not take stay as they are: grouped, weights computed at run time, output
// channels that are not a multiple of the block, a conv that would be the only one of its region,
// convs on a 1x1 image.
TEST(Nchwc, LeavesConvsItCannotOrShouldNotRun) {
  // grouped -> dynamic weights -> 16->12 -> 12->12 3x3 -> y
  Graph g = GraphBuilder(17)
                .Input("x", DType::kFloat32, {2, 16, 6, 6})
                .Input("wd", DType::kFloat32, {16, 16, 1, 1})
                .Init("wg", RandomFloat({16, 4, 3, 3}, 1))
                .Init("w12", RandomFloat({12, 16, 1, 1}, 2))
                .Init("w33", RandomFloat({12, 12, 3, 3}, 5))
                .Op("Conv", {"x", "wg"}, {"a"}, A({{"group", Attribute::Int(4)}, {"pads", Attribute::Ints({1, 1, 1, 1})}}))
                .Op("Conv", {"a", "wd"}, {"b"})
                .Op("Conv", {"b", "w12"}, {"c"})
                .Op("Conv", {"c", "w33"}, {"y"}, A({{"pads", Attribute::Ints({1, 1, 1, 1})}}))
                .Output("y")
                .Build();
  Graph h = g;
  auto r = Rewrite(h, 16);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(testing::CountOps(h, "NchwcConv"), 0);
  EXPECT_EQ(r->nchwc_nodes, 0);
  // With block 0 (NHWC) any channel count is one block: the last two convs form a region, entered
  // through one ToNchwc.
  Graph k = g;
  r = Rewrite(k, 0);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(testing::CountOps(k, "NchwcConv"), 2);
  EXPECT_EQ(testing::CountOps(k, "ToNchwc"), 1);
  EXPECT_EQ(testing::CountOps(k, "FromNchwc"), 1);
  const Tensor x = RandomFloat({2, 16, 6, 6}, 3), wd = RandomFloat({16, 16, 1, 1}, 4);
  SessionOptions ref;
  ref.backend = Backend::kReference;
  ref.optimize = false;
  auto want = Session::FromGraph(g, ref);
  auto got = Session::FromGraph(k, ref);
  ASSERT_TRUE(want.ok() && got.ok());
  auto a = (*want)->Run({{"x", x}, {"wd", wd}});
  auto b = (*got)->Run({{"x", x}, {"wd", wd}});
  ASSERT_TRUE(a.ok() && b.ok()) << (b.ok() ? "" : b.status().message());
  ExpectClose(*b, *a);
  // A lone convertible conv between two grouped ones stays NCHW.
  Graph lone = GraphBuilder(17)
                   .Input("x", DType::kFloat32, {2, 16, 6, 6})
                   .Init("wg", RandomFloat({16, 4, 3, 3}, 1))
                   .Init("w", RandomFloat({16, 16, 1, 1}, 2))
                   .Op("Conv", {"x", "wg"}, {"a"}, A({{"group", Attribute::Int(4)}, {"pads", Attribute::Ints({1, 1, 1, 1})}}))
                   .Op("Conv", {"a", "w"}, {"b"})
                   .Op("Conv", {"b", "wg"}, {"y"}, A({{"group", Attribute::Int(4)}, {"pads", Attribute::Ints({1, 1, 1, 1})}}))
                   .Output("y")
                   .Build();
  r = Rewrite(lone, 16);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(testing::CountOps(lone, "NchwcConv"), 0);
  // Squeeze-excitation convs on a 1x1 image stay NCHW.
  Graph se = GraphBuilder(17)
                 .Input("x", DType::kFloat32, {2, 16, 1, 1})
                 .Init("w1", RandomFloat({16, 16, 1, 1}, 1))
                 .Init("w2", RandomFloat({16, 16, 1, 1}, 2))
                 .Op("Conv", {"x", "w1"}, {"a"})
                 .Op("Conv", {"a", "w2"}, {"y"})
                 .Output("y")
                 .Build();
  r = Rewrite(se, 16);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(testing::CountOps(se, "NchwcConv"), 0);
}

// MobileNet's inverted residual block as exporters write it: pointwise Conv(16->32) + Clip(0, 6) ->
// depthwise Conv(32, kxk, stride s, group 32) + HardSwish -> pointwise Conv(32->16) + HardSigmoid
// -> Add of the block input's projection (LeakyRelu). Every conv joins one blocked region (the
// depthwise one on oneDNN's depthwise kernels, the activations as its post-ops), for each block,
// kernel size and stride, with the outputs of the unconverted graph on the reference kernels.
Graph InvertedResidual(int64_t k, int64_t stride) {
  const int64_t p = k / 2;
  const auto pads = Attribute::Ints({p, p, p, p});
  return GraphBuilder(17)
      .Input("x", DType::kFloat32, {Dim::Symbol("batch"), 16, 11, 11})
      .Init("w1", RandomFloat({32, 16, 1, 1}, 1, -0.5f, 0.5f))
      .Init("b1", RandomFloat({32}, 2))
      .Init("lo", Tensor::Scalar<float>(0.f))
      .Init("hi", Tensor::Scalar<float>(6.f))
      .Init("wd", RandomFloat({32, 1, k, k}, 3, -0.5f, 0.5f))
      .Init("bd", RandomFloat({32}, 4))
      .Init("w2", RandomFloat({16, 32, 1, 1}, 5, -0.3f, 0.3f))
      .Init("b2", RandomFloat({16}, 6))
      .Init("ws", RandomFloat({16, 16, 1, 1}, 7, -0.5f, 0.5f))
      .Op("Conv", {"x", "w1", "b1"}, {"c1"})
      .Op("Clip", {"c1", "lo", "hi"}, {"r1"})
      .Op("Conv", {"r1", "wd", "bd"}, {"cd"},
          A({{"group", Attribute::Int(32)}, {"pads", pads}, {"strides", Attribute::Ints({stride, stride})}}))
      .Op("HardSwish", {"cd"}, {"rd"})
      .Op("Conv", {"rd", "w2", "b2"}, {"c2"})
      .Op("HardSigmoid", {"c2"}, {"r2"}, A({{"alpha", Attribute::Float(0.3f)}, {"beta", Attribute::Float(0.4f)}}))
      .Op("Conv", {"x", "ws"}, {"cs"}, A({{"strides", Attribute::Ints({stride, stride})}}))
      .Op("LeakyRelu", {"cs"}, {"rs"}, A({{"alpha", Attribute::Float(0.1f)}}))
      .Op("Add", {"r2", "rs"}, {"y"})
      .Output("y")
      .Build();
}

TEST(Nchwc, DepthwiseConvsJoinTheRegionWithTheirActivations) {
  const Tensor x = RandomFloat({3, 16, 11, 11}, 21, -2.f, 2.f);
  for (int64_t k : {3, 5}) {
    for (int64_t stride : {1, 2}) {
      SessionOptions ref;
      ref.backend = Backend::kReference;
      ref.optimize = false;
      const std::vector<Tensor> want = RunGraph(InvertedResidual(k, stride), ref, x);
      for (int block : {0, 8, 16}) {
        SCOPED_TRACE("k " + std::to_string(k) + " stride " + std::to_string(stride) + " block " + std::to_string(block));
        Graph g = InvertedResidual(k, stride);
        auto r = Rewrite(g, block);
        ASSERT_TRUE(r.ok()) << r.status().message();
        EXPECT_EQ(testing::CountOps(g, "NchwcConv"), 4);
        EXPECT_EQ(testing::CountOps(g, "Conv"), 0);
        int depthwise = 0;
        for (const Node& n : g.nodes())
          depthwise += n.op_type == "NchwcConv" && n.attrs.GetInt("group", 1) == 32;
        EXPECT_EQ(depthwise, 1);
        ExpectCloseOnEveryBackend(g, x, want);
      }
    }
  }
}

// EfficientNet's MBConv block as torchvision exports it: Conv(16->32) + SiLU (Sigmoid and Mul) ->
// depthwise 3x3 + SiLU -> squeeze-excitation (GlobalAveragePool, 1x1 Conv + SiLU, 1x1 Conv,
// Sigmoid, Mul(scale, x) with the scale first) -> Conv(32->16) -> Add of the block input. The
// SiLUs fuse into their convs; the excitation's Mul and the residual Add run on blocked data, so
// only the pooled vector leaves the region and only its scale comes back.
Graph MbConv() {
  return GraphBuilder(17)
      .Input("x", DType::kFloat32, {Dim::Symbol("batch"), 16, 9, 9})
      .Init("w1", RandomFloat({32, 16, 1, 1}, 1, -0.5f, 0.5f))
      .Init("wd", RandomFloat({32, 1, 3, 3}, 2, -0.5f, 0.5f))
      .Init("bd", RandomFloat({32}, 3))
      .Init("wr", RandomFloat({8, 32, 1, 1}, 4, -0.5f, 0.5f))
      .Init("we", RandomFloat({32, 8, 1, 1}, 5, -0.5f, 0.5f))
      .Init("be", RandomFloat({32}, 6))
      .Init("w2", RandomFloat({16, 32, 1, 1}, 7, -0.3f, 0.3f))
      .Op("Conv", {"x", "w1"}, {"c1"})
      .Op("Sigmoid", {"c1"}, {"s1"})
      .Op("Mul", {"c1", "s1"}, {"a1"})
      .Op("Conv", {"a1", "wd", "bd"}, {"cd"}, A({{"group", Attribute::Int(32)}, {"pads", Attribute::Ints({1, 1, 1, 1})}}))
      .Op("Sigmoid", {"cd"}, {"sd"})
      .Op("Mul", {"sd", "cd"}, {"ad"})
      .Op("GlobalAveragePool", {"ad"}, {"p"})
      .Op("Conv", {"p", "wr"}, {"cr"})
      .Op("Sigmoid", {"cr"}, {"sr"})
      .Op("Mul", {"cr", "sr"}, {"ar"})
      .Op("Conv", {"ar", "we", "be"}, {"ce"})
      .Op("Sigmoid", {"ce"}, {"scale"})
      .Op("Mul", {"scale", "ad"}, {"e"})
      .Op("Conv", {"e", "w2"}, {"c2"})
      .Op("Add", {"c2", "x"}, {"y"})
      .Output("y")
      .Build();
}

TEST(Nchwc, SiluAndSqueezeExcitationStayInTheRegion) {
  const Tensor x = RandomFloat({3, 16, 9, 9}, 22, -2.f, 2.f);
  SessionOptions ref;
  ref.backend = Backend::kReference;
  ref.optimize = false;
  const std::vector<Tensor> want = RunGraph(MbConv(), ref, x);
  for (int block : {0, 8, 16}) {
    SCOPED_TRACE("block " + std::to_string(block));
    Graph g = MbConv();
    auto r = Rewrite(g, block);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->fused_activations, 4);  // three SiLUs and the excitation's Sigmoid
    EXPECT_EQ(testing::CountOps(g, "NchwcConv"), 3);
    EXPECT_EQ(testing::CountOps(g, "Conv"), 2);  // the excitation's, on a 1x1 image
    int silu = 0;
    for (const Node& n : g.nodes()) silu += n.attrs.GetString("_activation", "") == "Silu";
    EXPECT_EQ(silu, 3);
    EXPECT_EQ(testing::CountOps(g, "FromNchwc"), 2);  // the pooled vector, and y
    EXPECT_EQ(testing::CountOps(g, "ToNchwc"), 2);    // the input, and the scale
    for (const Node& n : g.nodes()) {
      if (n.op_type != "Mul") continue;
      EXPECT_EQ(g.value(n.outputs[0]).shape->size(), 5u) << "the excitation's Mul is blocked";
    }
    ExpectCloseOnEveryBackend(g, x, want);
  }
}

// Two DenseNet layers as torchvision exports them, with an Inception-style branch join: x [N, 16,
// 8, 8] -> Conv+Relu -> f0; BN -> Relu -> Conv 1x1 (16->32) -> BN -> Relu -> Conv 3x3 (32->16) ->
// Concat(f0, new) [N, 32] -> BN -> Relu -> Conv 1x1 (32->16) -> Concat(that, its input, axis -3)
// -> y [N, 48, 8, 8]. The BatchNormalizations after the Concats (pre-activation: no conv before
// them to fold into) and the Concats themselves stay in the region.
Graph DenseBlock() {
  auto bn = [](GraphBuilder& b, const std::string& p, int64_t c, uint32_t seed) {
    b.Init(p + "_s", RandomFloat({c}, seed, 0.5f, 1.5f))
        .Init(p + "_b", RandomFloat({c}, seed + 1))
        .Init(p + "_m", RandomFloat({c}, seed + 2))
        .Init(p + "_v", RandomFloat({c}, seed + 3, 0.5f, 2.f));
  };
  GraphBuilder b(17);
  b.Input("x", DType::kFloat32, {Dim::Symbol("batch"), 16, 8, 8})
      .Init("w0", RandomFloat({16, 16, 3, 3}, 1, -0.3f, 0.3f))
      .Init("w1", RandomFloat({32, 16, 1, 1}, 2, -0.4f, 0.4f))
      .Init("w2", RandomFloat({16, 32, 3, 3}, 3, -0.2f, 0.2f))
      .Init("w3", RandomFloat({16, 32, 1, 1}, 4, -0.3f, 0.3f));
  bn(b, "n1", 16, 10);
  bn(b, "n2", 32, 20);
  bn(b, "n3", 32, 30);
  const auto pads1 = Attribute::Ints({1, 1, 1, 1});
  return b.Op("Conv", {"x", "w0"}, {"c0"}, A({{"pads", pads1}}))
      .Op("Relu", {"c0"}, {"f0"})
      .Op("BatchNormalization", {"f0", "n1_s", "n1_b", "n1_m", "n1_v"}, {"t1"})
      .Op("Relu", {"t1"}, {"u1"})
      .Op("Conv", {"u1", "w1"}, {"c1"})
      .Op("BatchNormalization", {"c1", "n2_s", "n2_b", "n2_m", "n2_v"}, {"t2"})
      .Op("Relu", {"t2"}, {"u2"})
      .Op("Conv", {"u2", "w2"}, {"c2"}, A({{"pads", pads1}}))
      .Op("Concat", {"f0", "c2"}, {"k1"}, A({{"axis", Attribute::Int(1)}}))
      .Op("BatchNormalization", {"k1", "n3_s", "n3_b", "n3_m", "n3_v"}, {"t3"})
      .Op("Relu", {"t3"}, {"u3"})
      .Op("Conv", {"u3", "w3"}, {"c3"})
      .Op("Concat", {"c3", "k1"}, {"y"}, A({{"axis", Attribute::Int(-3)}}))
      .Output("y")
      .Build();
}

TEST(Nchwc, DenseBlocksConcatenateAndNormalizeOnBlockedData) {
  const Tensor x = RandomFloat({2, 16, 8, 8}, 23, -1.f, 1.f);
  SessionOptions ref;
  ref.backend = Backend::kReference;
  ref.optimize = false;
  const std::vector<Tensor> want = RunGraph(DenseBlock(), ref, x);
  for (int block : {0, 8, 16}) {
    SCOPED_TRACE("block " + std::to_string(block));
    Graph g = DenseBlock();
    auto r = Rewrite(g, block);
    ASSERT_TRUE(r.ok()) << r.status().message();
    // Four convs and the two pre-activation BatchNormalizations (depthwise 1x1 convs with their
    // Relus); the BN after the 1x1 conv folded into it.
    EXPECT_EQ(testing::CountOps(g, "NchwcConv"), 6);
    EXPECT_EQ(testing::CountOps(g, "BatchNormalization"), 0);
    EXPECT_EQ(testing::CountOps(g, "Relu"), 0);
    EXPECT_EQ(testing::CountOps(g, "ToNchwc"), 1);    // x
    EXPECT_EQ(testing::CountOps(g, "FromNchwc"), 1);  // y
    for (const Node& n : g.nodes()) {
      if (n.op_type == "Concat") {
        EXPECT_EQ(g.value(n.outputs[0]).shape->size(), 5u) << "the Concats are blocked";
      }
    }
    ExpectCloseOnEveryBackend(g, x, want);
  }
}

// Pool windows on blocked data against the reference NCHW pools: max and average (with and
// without count_include_pad), strides 1 and 2, uneven pads, dilation, ceil_mode, between two
// convs (so that the pool is inside a region), for every block.
TEST(Nchwc, PoolWindowsMatchThePlainPools) {
  struct Case {
    std::string op;
    std::vector<int64_t> kernel, strides, pads, dilations;
    int64_t ceil = 0, count_pad = 0;
  };
  const std::vector<Case> cases = {
      {"MaxPool", {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}},          // GoogLeNet's branch pool
      {"MaxPool", {3, 3}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1},       // its stem pool, ceil_mode
      {"MaxPool", {3, 2}, {2, 1}, {1, 0, 2, 1}, {2, 1}},          // uneven pads, dilation
      {"AveragePool", {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 0, 0},
      {"AveragePool", {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1, 1},
  };
  for (const Case& c : cases) {
    AttributeMap pa = A({{"kernel_shape", Attribute::Ints(c.kernel)}, {"strides", Attribute::Ints(c.strides)},
                         {"pads", Attribute::Ints(c.pads)}, {"ceil_mode", Attribute::Int(c.ceil)}});
    if (c.op == "MaxPool") pa.Set("dilations", Attribute::Ints(c.dilations));
    else pa.Set("count_include_pad", Attribute::Int(c.count_pad));
    auto build = [&] {
      return GraphBuilder(17)
          .Input("x", DType::kFloat32, {Dim::Symbol("batch"), 16, 9, 11})
          .Init("w0", RandomFloat({16, 16, 3, 3}, 1, -0.3f, 0.3f))
          .Init("w1", RandomFloat({16, 16, 1, 1}, 2, -0.3f, 0.3f))
          .Op("Conv", {"x", "w0"}, {"c0"}, A({{"pads", Attribute::Ints({1, 1, 1, 1})}}))
          .Op(c.op, {"c0"}, {"p"}, pa)
          .Op("Conv", {"p", "w1"}, {"y"})
          .Output("y")
          .Build();
    };
    const Tensor x = RandomFloat({2, 16, 9, 11}, 24, -1.f, 1.f);
    SessionOptions ref;
    ref.backend = Backend::kReference;
    ref.optimize = false;
    const std::vector<Tensor> want = RunGraph(build(), ref, x);
    for (int block : {0, 8, 16}) {
      SCOPED_TRACE(c.op + " case, block " + std::to_string(block));
      Graph g = build();
      auto r = Rewrite(g, block);
      ASSERT_TRUE(r.ok()) << r.status().message();
      ASSERT_EQ(testing::CountOps(g, "NchwcPool"), 1);
      ExpectCloseOnEveryBackend(g, x, want);
    }
  }
}

// A binarized CNN as compress-model --binarize writes it: stem Conv -> Relu -> MaxPool ->
// ai.whittle BinaryConv (16 -> 16, 3x3, bias) -> Relu -> MaxPool -> y. With float activations the
// BinaryConv becomes an NchwcConv on its decoded weight, both Relus are fused, and the outputs
// are those of the unconverted graph on the reference kernels; with binary activations it stays,
// and the stem, alone in its region, stays NCHW.
Graph BinarizedCnn(const std::string& activations) {
  const int64_t k = 16 * 9;
  const Tensor wf = RandomFloat({16, k}, 41);
  Tensor bits(DType::kUInt64, {16, BinaryWords(k)});
  for (int64_t m = 0; m < 16; ++m) PackSigns(wf.data<float>() + m * k, k, bits.data<uint64_t>() + m * BinaryWords(k));
  auto pads1 = Attribute::Ints({1, 1, 1, 1});
  auto pool = A({{"kernel_shape", Attribute::Ints({2, 2})}, {"strides", Attribute::Ints({2, 2})}});
  Graph g = GraphBuilder(17)
                .Input("x", DType::kFloat32, {Dim::Symbol("batch"), 1, 8, 8})
                .Init("w0", RandomFloat({16, 1, 3, 3}, 42, -0.5f, 0.5f))
                .Init("b0", RandomFloat({16}, 43))
                .Init("bits", bits)
                .Init("alpha", RandomFloat({16}, 44, 0.01f, 0.1f))
                .Init("b1", RandomFloat({16}, 45))
                .Op("Conv", {"x", "w0", "b0"}, {"c0"}, A({{"pads", pads1}}))
                .Op("Relu", {"c0"}, {"r0"})
                .Op("MaxPool", {"r0"}, {"p0"}, pool)
                .Op("BinaryConv", {"p0", "bits", "alpha", "b1"}, {"c1"},
                    A({{"in_channels", Attribute::Int(16)}, {"out_channels", Attribute::Int(16)},
                       {"kernel_shape", Attribute::Ints({3, 3})}, {"pads", pads1},
                       {"activations", Attribute::String(activations)}}))
                .Op("Relu", {"c1"}, {"r1"})
                .Op("MaxPool", {"r1"}, {"y"}, pool)
                .Output("y")
                .Build();
  for (Node& n : g.nodes())
    if (n.op_type == "BinaryConv") n.domain = kWhittleDomain;
  g.opset_imports[kWhittleDomain] = 1;
  return g;
}

TEST(Nchwc, BinaryConvWithFloatActivationsJoinsTheRegion) {
  const Tensor x = RandomFloat({3, 1, 8, 8}, 46);
  for (const std::string act : {"float", "binary"}) {
    SessionOptions ref;
    ref.backend = Backend::kReference;
    ref.optimize = false;
    const std::vector<Tensor> want = RunGraph(BinarizedCnn(act), ref, x);
    for (int block : {0, 8, 16}) {
      SCOPED_TRACE(act + " block " + std::to_string(block));
      Graph g = BinarizedCnn(act);
      auto r = Rewrite(g, block);
      ASSERT_TRUE(r.ok()) << r.status().message();
      EXPECT_EQ(testing::CountOps(g, "Relu"), 0);  // both fused into their producers
      EXPECT_EQ(testing::CountOps(g, "NchwcConv"), act == "float" ? 2 : 0);
      EXPECT_EQ(testing::CountOps(g, "BinaryConv"), act == "float" ? 0 : 1);
      for (const Node& n : g.nodes()) {
        if (n.op_type == "NchwcConv" || n.op_type == "BinaryConv") {
          EXPECT_EQ(n.attrs.GetString("_activation", ""), "Relu") << n.name;
        }
      }
      for (Backend backend : {Backend::kReference, Backend::kCpu}) {
        SCOPED_TRACE(BackendName(backend));
        SessionOptions so;
        so.backend = backend;
        so.optimize = false;  // g is rewritten already
        ExpectClose(RunGraph(g, so, x), want);
      }
    }
  }
}

// An NchwcConv that neither Winograd nor oneDNN takes runs the planar CPU conv (DeepLabV3's ASPP
// conv, dilation 12 on an 8 x 8 map: oneDNN 2.6 has no blocked kernel for it, here or held to
// AVX2), with its residual and activation: the same result as the reference Conv -> Add -> Relu.
TEST(Nchwc, ConvsOneDnnDeclinesRunThePlanarConv) {
  const int64_t c = 16, m = 8;
  AttributeMap conv;
  conv.Set("dilations", Attribute::Ints({12, 12}));
  conv.Set("pads", Attribute::Ints({12, 12, 12, 12}));
  conv.Set("kernel_shape", Attribute::Ints({3, 3}));
  const Tensor w = RandomFloat({m, c, 3, 3}, 61), b = RandomFloat({m}, 62);
  Graph plain = GraphBuilder(17)
                    .Input("x", DType::kFloat32, {1, c, 8, 8})
                    .Input("r", DType::kFloat32, {1, m, 8, 8})
                    .Init("w", w).Init("b", b)
                    .Op("Conv", {"x", "w", "b"}, {"y0"}, conv)
                    .Op("Add", {"y0", "r"}, {"y1"})
                    .Op("Relu", {"y1"}, {"y"})
                    .Output("y")
                    .Build();
  Graph blocked = GraphBuilder(17).Input("x", DType::kFloat32, {1, c, 8, 8}).Input("r", DType::kFloat32, {1, m, 8, 8})
                      .Init("w", w).Init("b", b).Build();
  blocked.opset_imports["ai.whittle"] = 1;
  auto add = [&](const char* op, std::vector<std::string> in, const char* out, AttributeMap a) {
    Node n;
    n.name = out;
    n.op_type = op;
    n.domain = "ai.whittle";
    for (const std::string& i : in) n.inputs.push_back(blocked.FindValue(i));
    n.outputs = {blocked.AddValue(out)};
    n.attrs = std::move(a);
    blocked.AddNode(n);
  };
  AttributeMap to, from, nc = conv;
  to.Set("block", Attribute::Int(8));
  from.Set("channels", Attribute::Int(m));
  nc.Set("block", Attribute::Int(8));
  nc.Set("_activation", Attribute::String("Relu"));
  add("ToNchwc", {"x"}, "xb", to);
  add("ToNchwc", {"r"}, "rb", to);
  add("NchwcConv", {"xb", "w", "b", "rb"}, "yb", nc);
  add("FromNchwc", {"yb"}, "y", from);
  blocked.outputs().push_back(blocked.FindValue("y"));
  const std::map<std::string, Tensor> in = {{"x", RandomFloat({1, c, 8, 8}, 63)}, {"r", RandomFloat({1, m, 8, 8}, 64)}};
  auto ref = Session::FromGraph(plain, {.backend = Backend::kReference, .optimize = false});
  auto cpu = Session::FromGraph(blocked, {.backend = Backend::kCpu, .optimize = false});
  ASSERT_TRUE(ref.ok() && cpu.ok()) << (cpu.ok() ? ref.status().message() : cpu.status().message());
  auto want = (*ref)->Run(in);
  auto got = (*cpu)->Run(in);
  ASSERT_TRUE(want.ok() && got.ok()) << (got.ok() ? want.status().message() : got.status().message());
  EXPECT_TRUE(testing::TensorsClose((*got)[0], (*want)[0], 1e-4f, 1e-4f));
}

TEST(Nchwc, OpsRejectBadBlocks) {
  Graph g = GraphBuilder(17).Input("x", DType::kFloat32, {1, 16, 4, 4}).Build();
  g.opset_imports["ai.whittle"] = 1;
  Node to;
  to.name = "to";
  to.op_type = "ToNchwc";
  to.domain = "ai.whittle";
  to.inputs = {g.FindValue("x")};
  to.outputs = {g.AddValue("y")};
  to.attrs.Set("block", Attribute::Int(12));
  g.AddNode(to);
  g.outputs().push_back(g.FindValue("y"));
  auto s = Session::FromGraph(g);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("block must be"), std::string::npos) << s.status().message();
}

}  // namespace
}  // namespace whittle
