// QDQ fusion: which patterns become ai.whittle QConv/QGemm (and which must not), and that the
// fused session computes what the float-emulating session (optimize=false, which runs every
// QuantizeLinear/DequantizeLinear as written) computes, up to int8 rounding: quantized outputs
// within one quantum everywhere and identical on >= 99 % of the elements.
#include "runtime/rewrite/fuse_qdq.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "lib/ops/op_def.h"
#include "runtime/rewrite/rewrite.h"
#include "runtime/session_internal.h"
#include "whittle/session.h"
#include "tests/util/graph_builder.h"
#include "tests/util/test_util.h"

namespace whittle {
namespace {

using testing::GraphBuilder;
using testing::RandomFloat;

AttributeMap Attrs(std::initializer_list<std::pair<const char*, Attribute>> kv) {
  AttributeMap m;
  for (const auto& [k, v] : kv) m.Set(k, v);
  return m;
}

struct QWeight {
  Tensor q, scale, zp;
};

// Symmetric int8 weights, one scale per slice along axis (per tensor when axis < 0).
QWeight QuantizeWeight(const Tensor& w, int axis) {
  const int64_t channels = axis < 0 ? 1 : w.dim(axis);
  int64_t inner = 1;
  for (int i = axis + 1; axis >= 0 && i < w.rank(); ++i) inner *= w.dim(i);
  auto ch = [&](int64_t i) { return axis < 0 ? 0 : (i / inner) % channels; };
  std::vector<float> amax(static_cast<size_t>(channels), 0.f);
  const float* p = w.data<float>();
  for (int64_t i = 0; i < w.numel(); ++i) amax[static_cast<size_t>(ch(i))] = std::max(amax[static_cast<size_t>(ch(i))], std::fabs(p[i]));
  QWeight r;
  r.q = Tensor(DType::kInt8, w.dims());
  const Dims pd = axis < 0 ? Dims{} : Dims{channels};
  r.scale = Tensor(DType::kFloat32, pd);
  r.zp = Tensor(DType::kInt8, pd);
  for (int64_t c = 0; c < channels; ++c) r.scale.data<float>()[c] = amax[static_cast<size_t>(c)] / 127.f;
  for (int64_t i = 0; i < w.numel(); ++i)
    r.q.data<int8_t>()[i] = static_cast<int8_t>(std::nearbyint(p[i] / r.scale.data<float>()[ch(i)]));
  return r;
}

// Bias as int32 at scale x_scale * w_scale[c] (what quantizers emit), with that scale tensor.
std::pair<Tensor, Tensor> QuantizeBias(const Tensor& b, float x_scale, const Tensor& w_scale, float scale_factor = 1.f) {
  const int64_t n = b.numel();
  Tensor q(DType::kInt32, {n}), s(DType::kFloat32, {n});
  for (int64_t c = 0; c < n; ++c) {
    const float sc = x_scale * w_scale.data<float>()[w_scale.numel() == 1 ? 0 : c] * scale_factor;
    s.data<float>()[c] = sc;
    q.data<int32_t>()[c] = static_cast<int32_t>(std::nearbyint(b.data<float>()[c] / sc));
  }
  return {q, s};
}

// DequantizeLinear nodes reading a constant (weights, biases).
int ConstDequantizes(const Graph& g) {
  int n = 0;
  for (const Node& node : g.nodes())
    n += node.op_type == "DequantizeLinear" && g.value(node.inputs[0]).is_constant();
  return n;
}

// Runs g with and without the runtime's rewrites on the same inputs.
struct Compared {
  std::vector<Tensor> fused, emulated;
  Graph fused_graph;
};
Compared RunBoth(const Graph& g, const std::map<std::string, Tensor>& inputs) {
  Compared c;
  auto fused = Session::FromGraph(g, {.optimize = true});
  auto emu = Session::FromGraph(g, {.backend = Backend::kReference, .optimize = false});
  EXPECT_TRUE(fused.ok()) << fused.status().message();
  EXPECT_TRUE(emu.ok()) << emu.status().message();
  if (!fused.ok() || !emu.ok()) return c;
  c.fused_graph = SessionGraph(**fused);
  auto a = (*fused)->Run(inputs);
  auto b = (*emu)->Run(inputs);
  EXPECT_TRUE(a.ok()) << a.status().message();
  EXPECT_TRUE(b.ok()) << b.status().message();
  if (a.ok()) c.fused = *a;
  if (b.ok()) c.emulated = *b;
  return c;
}

// Quantized outputs: within one quantum everywhere, identical on >= 99 %.
void ExpectQuantizedAgree(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.dtype(), b.dtype());
  ASSERT_EQ(a.dims(), b.dims());
  ASSERT_TRUE(a.dtype() == DType::kUInt8 || a.dtype() == DType::kInt8);
  int64_t same = 0;
  int max_diff = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const int x = a.dtype() == DType::kUInt8 ? a.data<uint8_t>()[i] : a.data<int8_t>()[i];
    const int y = b.dtype() == DType::kUInt8 ? b.data<uint8_t>()[i] : b.data<int8_t>()[i];
    same += x == y;
    max_diff = std::max(max_diff, std::abs(x - y));
  }
  EXPECT_LE(max_diff, 1);
  EXPECT_GE(static_cast<double>(same), 0.99 * static_cast<double>(a.numel())) << same << " of " << a.numel();
  // A quantized output stuck at one value would pass the above trivially.
  int distinct = 0;
  std::vector<bool> seen(256, false);
  for (int64_t i = 0; i < a.numel(); ++i) {
    const int v = static_cast<const uint8_t*>(a.raw_data())[i];
    if (!seen[static_cast<size_t>(v)]) ++distinct, seen[static_cast<size_t>(v)] = true;
  }
  EXPECT_GT(distinct, 10);
}

constexpr float kXScale = 1.f / 255.f;

// A Clip after the conv: constant bounds, or a max fed as a graph input ("clip_max").
struct ClipSpec {
  float min = 0.f, max = 6.f;
  bool max_is_input = false;
};

// x (float, [0,1]) -> Q -> DQ -> Conv (per-channel int8 weight, int32 bias) -> Relu | Clip -> [Q].
Graph ConvGraph(bool quantized_output, bool relu = true, int64_t group = 1, std::optional<ClipSpec> clip = {}) {
  const int64_t cin = 4, cout = 8;
  Tensor w = RandomFloat({cout, cin / group, 3, 3}, 21);
  Tensor b = RandomFloat({cout}, 22, -0.3f, 0.3f);
  QWeight qw = QuantizeWeight(w, 0);
  auto [bq, bs] = QuantizeBias(b, kXScale, qw.scale);
  GraphBuilder gb(13);
  gb.Input("x", DType::kFloat32, {Dim::Symbol("batch"), cin, 9, 9})
      .Init("xs", Tensor::Scalar<float>(kXScale)).Init("xz", Tensor::Scalar<uint8_t>(0))
      .Init("wq", qw.q).Init("ws", qw.scale).Init("wz", qw.zp)
      .Init("bq", bq).Init("bs", bs).Init("bz", Tensor(DType::kInt32, {cout}))
      .Init("ys", Tensor::Scalar<float>(0.02f)).Init("yz", Tensor::Scalar<uint8_t>(relu && !clip ? 0 : 128))
      .Op("QuantizeLinear", {"x", "xs", "xz"}, {"xq"})
      .Op("DequantizeLinear", {"xq", "xs", "xz"}, {"xd"})
      .Op("DequantizeLinear", {"wq", "ws", "wz"}, {"wd"}, Attrs({{"axis", Attribute::Int(0)}}))
      .Op("DequantizeLinear", {"bq", "bs", "bz"}, {"bd"}, Attrs({{"axis", Attribute::Int(0)}}))
      .Op("Conv", {"xd", "wd", "bd"}, {"c"},
          Attrs({{"pads", Attribute::Ints({1, 1, 1, 1})}, {"kernel_shape", Attribute::Ints({3, 3})},
                 {"group", Attribute::Int(group)}}));
  std::string y = "c";
  if (clip) {
    gb.Init("clip_min", Tensor::Scalar<float>(clip->min));
    if (clip->max_is_input) gb.Input("clip_max", DType::kFloat32, {});
    else gb.Init("clip_max", Tensor::Scalar<float>(clip->max));
    gb.Op("Clip", {"c", "clip_min", "clip_max"}, {"r"}), y = "r";
  } else if (relu) {
    gb.Op("Relu", {"c"}, {"r"}), y = "r";
  }
  if (quantized_output) gb.Op("QuantizeLinear", {y, "ys", "yz"}, {"yq"}), y = "yq";
  return gb.Output(y).Build();
}

std::map<std::string, Tensor> Image(const Dims& d, uint32_t seed = 5) { return {{"x", RandomFloat(d, seed, 0.f, 1.f)}}; }

TEST(QdqFusion, ConvReluQuantizedOutput) {
  Compared c = RunBoth(ConvGraph(true), Image({2, 4, 9, 9}));
  ASSERT_EQ(c.fused.size(), 1u);
  EXPECT_EQ(testing::CountOps(c.fused_graph, "QConv"), 1);
  EXPECT_EQ(testing::CountOps(c.fused_graph, "Conv"), 0);
  EXPECT_EQ(testing::CountOps(c.fused_graph, "Relu"), 0);
  EXPECT_EQ(ConstDequantizes(c.fused_graph), 0);
  EXPECT_EQ(testing::CountOps(c.fused_graph, "DequantizeLinear"), 0);
  EXPECT_EQ(c.fused_graph.OpsetFor("ai.whittle"), 1);
  ExpectQuantizedAgree(c.fused[0], c.emulated[0]);
}

TEST(QdqFusion, GroupedConvWithoutReluMidZeroPoint) {
  Compared c = RunBoth(ConvGraph(true, /*relu=*/false, /*group=*/2), Image({1, 4, 9, 9}, 8));
  ASSERT_EQ(c.fused.size(), 1u);
  EXPECT_EQ(testing::CountOps(c.fused_graph, "QConv"), 1);
  ExpectQuantizedAgree(c.fused[0], c.emulated[0]);
}

TEST(QdqFusion, ConvFloatOutputFusesRelu) {
  Compared c = RunBoth(ConvGraph(false), Image({2, 4, 9, 9}));
  ASSERT_EQ(c.fused.size(), 1u);
  ASSERT_EQ(testing::CountOps(c.fused_graph, "QConv"), 1);
  for (const Node& n : c.fused_graph.nodes())
    if (n.op_type == "QConv") {
      EXPECT_EQ(n.attrs.GetString("_activation", ""), "Relu");
    }
  EXPECT_EQ(c.fused[0].dtype(), DType::kFloat32);
  // The only difference is float vs int32 accumulation order: far below a quantum of 0.02.
  EXPECT_LT(testing::MaxAbsDiff(c.fused[0], c.emulated[0]), 1e-4f);
  float mn = 1e9f;
  for (int64_t i = 0; i < c.fused[0].numel(); ++i) mn = std::min(mn, c.fused[0].data<float>()[i]);
  EXPECT_GE(mn, 0.f);
}

// Conv -> Clip(0.1, 0.5) -> Q (scale 0.02, zero point 128): the Clip becomes the integer clamp
// [Q(0.1), Q(0.5)] = [133, 153] of the fused QConv's epilogue, and both bounds are reached.
TEST(QdqFusion, ConvClipBeforeQuantizeNarrowsTheIntegerClamp) {
  Compared c = RunBoth(ConvGraph(true, false, 1, ClipSpec{0.1f, 0.5f}), Image({2, 4, 9, 9}));
  ASSERT_EQ(c.fused.size(), 1u);
  ASSERT_EQ(testing::CountOps(c.fused_graph, "QConv"), 1);
  EXPECT_EQ(testing::CountOps(c.fused_graph, "Clip"), 0);
  EXPECT_EQ(testing::CountOps(c.fused_graph, "QuantizeLinear"), 1);  // the input's only
  for (const Node& n : c.fused_graph.nodes())
    if (n.op_type == "QConv") {
      EXPECT_EQ(n.attrs.GetString("_activation", ""), "Clip");
      EXPECT_FLOAT_EQ(n.attrs.GetFloat("_min", 0.f), 0.1f);
      EXPECT_FLOAT_EQ(n.attrs.GetFloat("_max", 0.f), 0.5f);
    }
  ExpectQuantizedAgree(c.fused[0], c.emulated[0]);
  const Tensor& y = c.fused[0];
  const uint8_t* p = y.data<uint8_t>();
  EXPECT_EQ(*std::min_element(p, p + y.numel()), 133);
  EXPECT_EQ(*std::max_element(p, p + y.numel()), 153);
  EXPECT_GT(std::count(p, p + y.numel(), 133), 0);
  EXPECT_GT(std::count(p, p + y.numel(), 153), 0);
}

// A Clip stays a node where its output is float (no QuantizeLinear after it) or a bound is
// computed at run time; the results still agree with the emulation.
TEST(QdqFusion, ClipStaysWithoutQuantizeOrWithRuntimeBounds) {
  Compared f = RunBoth(ConvGraph(false, false, 1, ClipSpec{0.1f, 0.5f}), Image({1, 4, 9, 9}));
  ASSERT_EQ(f.fused.size(), 1u);
  EXPECT_EQ(testing::CountOps(f.fused_graph, "QConv"), 1);
  EXPECT_EQ(testing::CountOps(f.fused_graph, "Clip"), 1);
  EXPECT_LT(testing::MaxAbsDiff(f.fused[0], f.emulated[0]), 1e-4f);

  std::map<std::string, Tensor> in = Image({1, 4, 9, 9});
  in["clip_max"] = Tensor::Scalar<float>(0.5f);
  Compared r = RunBoth(ConvGraph(true, false, 1, ClipSpec{0.1f, 0.5f, /*max_is_input=*/true}), in);
  ASSERT_EQ(r.fused.size(), 1u);
  EXPECT_EQ(testing::CountOps(r.fused_graph, "Clip"), 1);
  ExpectQuantizedAgree(r.fused[0], r.emulated[0]);
}

// x [M, K] -> Q -> DQ -> Gemm(transB=1, per-channel int8 W [N, K], bias) -> Q.
Graph GemmGraph(bool int32_bias, float alpha = 1.f, float bias_scale_factor = 1.f, int w_axis = 0) {
  const int64_t k = 24, n = 12;
  Tensor w = RandomFloat({n, k}, 31);
  Tensor b = RandomFloat({n}, 32, -0.5f, 0.5f);
  QWeight qw = QuantizeWeight(w, w_axis);
  GraphBuilder gb(13);
  gb.Input("x", DType::kFloat32, {Dim::Symbol("batch"), k})
      .Init("xs", Tensor::Scalar<float>(kXScale)).Init("xz", Tensor::Scalar<uint8_t>(0))
      .Init("wq", qw.q).Init("ws", qw.scale).Init("wz", qw.zp)
      .Init("ys", Tensor::Scalar<float>(0.03f)).Init("yz", Tensor::Scalar<uint8_t>(128))
      .Op("QuantizeLinear", {"x", "xs", "xz"}, {"xq"})
      .Op("DequantizeLinear", {"xq", "xs", "xz"}, {"xd"})
      .Op("DequantizeLinear", {"wq", "ws", "wz"}, {"wd"}, Attrs({{"axis", Attribute::Int(w_axis)}}));
  if (int32_bias) {
    auto [bq, bs] = QuantizeBias(b, kXScale, qw.scale, bias_scale_factor);
    gb.Init("bq", bq).Init("bs", bs).Op("DequantizeLinear", {"bq", "bs"}, {"bd"}, Attrs({{"axis", Attribute::Int(0)}}));
  } else {
    gb.Init("bd", b);
  }
  gb.Op("Gemm", {"xd", "wd", "bd"}, {"g"}, Attrs({{"transB", Attribute::Int(1)}, {"alpha", Attribute::Float(alpha)}}))
      .Op("QuantizeLinear", {"g", "ys", "yz"}, {"yq"});
  return gb.Output("yq").Build();
}

std::map<std::string, Tensor> Rows(int64_t m, int64_t k = 24) { return {{"x", RandomFloat({m, k}, 41, 0.f, 1.f)}}; }

TEST(QdqFusion, GemmTransBInt32Bias) {
  Compared c = RunBoth(GemmGraph(true), Rows(37));
  ASSERT_EQ(c.fused.size(), 1u);
  EXPECT_EQ(testing::CountOps(c.fused_graph, "QGemm"), 1);
  EXPECT_EQ(testing::CountOps(c.fused_graph, "Gemm"), 0);
  EXPECT_EQ(ConstDequantizes(c.fused_graph), 0);
  // The int32 bias initializer is used as is (its scale matches x_scale * w_scale).
  bool reused = false;
  for (const Node& n : c.fused_graph.nodes())
    if (n.op_type == "QGemm") reused = n.inputs.size() > 8 && c.fused_graph.value(n.inputs[8]).name == "bq";
  EXPECT_TRUE(reused);
  ExpectQuantizedAgree(c.fused[0], c.emulated[0]);
}

TEST(QdqFusion, GemmFloatBiasAndMismatchedBiasScaleAreRequantized) {
  for (bool int32_bias : {false, true}) {
    Compared c = RunBoth(GemmGraph(int32_bias, 1.f, int32_bias ? 3.f : 1.f), Rows(29));
    ASSERT_EQ(c.fused.size(), 1u);
    EXPECT_EQ(testing::CountOps(c.fused_graph, "QGemm"), 1) << int32_bias;
    ExpectQuantizedAgree(c.fused[0], c.emulated[0]);
  }
}

TEST(QdqFusion, MatMulWithBatchedInput) {
  const int64_t k = 16, n = 8;
  QWeight qw = QuantizeWeight(RandomFloat({k, n}, 51), 1);
  Graph g = GraphBuilder(13)
                .Input("x", DType::kFloat32, {2, 3, k})
                .Init("xs", Tensor::Scalar<float>(kXScale)).Init("xz", Tensor::Scalar<uint8_t>(0))
                .Init("wq", qw.q).Init("ws", qw.scale).Init("wz", qw.zp)
                .Init("ys", Tensor::Scalar<float>(0.02f)).Init("yz", Tensor::Scalar<int8_t>(-3))
                .Op("QuantizeLinear", {"x", "xs", "xz"}, {"xq"})
                .Op("DequantizeLinear", {"xq", "xs", "xz"}, {"xd"})
                .Op("DequantizeLinear", {"wq", "ws", "wz"}, {"wd"}, Attrs({{"axis", Attribute::Int(1)}}))
                .Op("MatMul", {"xd", "wd"}, {"m"})
                .Op("QuantizeLinear", {"m", "ys", "yz"}, {"yq"})
                .Output("yq")
                .Build();
  Compared c = RunBoth(g, {{"x", RandomFloat({2, 3, k}, 52, 0.f, 1.f)}});
  ASSERT_EQ(c.fused.size(), 1u);
  EXPECT_EQ(testing::CountOps(c.fused_graph, "QGemm"), 1);
  EXPECT_EQ(c.fused[0].dims(), (Dims{2, 3, n}));
  EXPECT_EQ(c.fused[0].dtype(), DType::kInt8);
  ExpectQuantizedAgree(c.fused[0], c.emulated[0]);
}

TEST(QdqFusion, SharedDequantizeStaysForTheUnfusedReader) {
  // DQ(x) feeds the Gemm and a Relu that is a graph output: the Gemm fuses, the DQ stays.
  Graph g = GemmGraph(true);
  const int xd = g.FindValue("xd");
  const int r = g.AddValue("side");
  Node relu;
  relu.name = "side_relu";
  relu.op_type = "Relu";
  relu.inputs = {xd};
  relu.outputs = {r};
  g.AddNode(relu);
  g.outputs().push_back(r);
  Compared c = RunBoth(g, Rows(16));
  ASSERT_EQ(c.fused.size(), 2u);
  EXPECT_EQ(testing::CountOps(c.fused_graph, "QGemm"), 1);
  EXPECT_EQ(testing::CountOps(c.fused_graph, "DequantizeLinear"), 1);
  ExpectQuantizedAgree(c.fused[0], c.emulated[0]);
  EXPECT_TRUE(testing::TensorsClose(c.fused[1], c.emulated[1], 0, 0));
}

TEST(QdqFusion, GraphOutputInTheMiddleKeepsFloatValue) {
  // The Gemm's float output is also a graph output: no trailing Q fusion, float-output QGemm.
  Graph g = GemmGraph(true);
  g.outputs().push_back(g.FindValue("g"));
  Compared c = RunBoth(g, Rows(16));
  ASSERT_EQ(c.fused.size(), 2u);
  EXPECT_EQ(testing::CountOps(c.fused_graph, "QGemm"), 1);
  EXPECT_EQ(testing::CountOps(c.fused_graph, "QuantizeLinear"), 2);  // the input's and the output's
  EXPECT_LT(testing::MaxAbsDiff(c.fused[1], c.emulated[1]), 1e-4f);
  ExpectQuantizedAgree(c.fused[0], c.emulated[0]);
}

// Patterns that must not fuse, checked on the graph alone (no kernels involved).
int FusedCount(Graph g) {
  RegisterAllOps();
  EXPECT_TRUE(InferShapes(g).ok());
  QdqFusionCounts counts;
  EXPECT_TRUE(FuseQdq(g, &counts).ok());
  return counts.fused;
}

TEST(QdqFusion, PatternsThatMustNotFuse) {
  EXPECT_EQ(FusedCount(GemmGraph(true)), 1);  // the control
  // alpha != 1.
  EXPECT_EQ(FusedCount(GemmGraph(false, 0.5f)), 0);
  // Per-channel along K of a transB=1 weight [N, K] (axis 1): the scale varies along the
  // reduction axis, which an int32 accumulator cannot carry.
  EXPECT_EQ(FusedCount(GemmGraph(false, 1.f, 1.f, /*w_axis=*/1)), 0);
  // Non-constant weight: the quantized weight is a graph input.
  Graph g = GemmGraph(false);
  const int wq = g.FindValue("wq");
  Value& v = g.value(wq);
  v.initializer.reset();
  g.inputs().push_back(wq);
  EXPECT_EQ(FusedCount(g), 0);
  // A float activation (no DequantizeLinear on the input) with an int8 weight.
  Graph f = GemmGraph(false);
  for (Node& n : f.nodes())
    if (n.op_type == "Gemm") n.inputs[0] = f.FindValue("x");
  EXPECT_EQ(FusedCount(f), 0);
}

TEST(QdqFusion, FusingTwiceChangesNothing) {
  Graph g = ConvGraph(true);
  RegisterAllOps();
  ASSERT_TRUE(InferShapes(g).ok());
  QdqFusionCounts first, second;
  ASSERT_TRUE(FuseQdq(g, &first).ok());
  ASSERT_TRUE(g.Compact().ok());
  ASSERT_TRUE(FuseQdq(g, &second).ok());
  EXPECT_EQ(first.fused, 1);
  EXPECT_EQ(second.fused, 0);
  EXPECT_EQ(second.passthrough, 0);
}

TEST(QdqFusion, MaxPoolAndFlattenRunOnInt8Data) {
  // Conv -> Q -> DQ -> MaxPool -> Q -> DQ -> Flatten -> Q -> DQ -> Gemm -> (float logits), as
  // ONNX Runtime's quantize_static writes it.
  const int64_t cout = 4;
  QWeight cw = QuantizeWeight(RandomFloat({cout, 1, 3, 3}, 61), 0);
  QWeight gw = QuantizeWeight(RandomFloat({5, cout * 4 * 4}, 62), 0);
  const float s1 = 0.01f;
  Graph g = GraphBuilder(13)
                .Input("x", DType::kFloat32, {Dim::Symbol("batch"), 1, 8, 8})
                .Init("xs", Tensor::Scalar<float>(kXScale)).Init("xz", Tensor::Scalar<uint8_t>(0))
                .Init("cwq", cw.q).Init("cws", cw.scale).Init("cwz", cw.zp)
                .Init("gwq", gw.q).Init("gws", gw.scale).Init("gwz", gw.zp)
                .Init("s1", Tensor::Scalar<float>(s1)).Init("z1", Tensor::Scalar<uint8_t>(0))
                .Init("s1b", Tensor::Scalar<float>(s1)).Init("z1b", Tensor::Scalar<uint8_t>(0))
                .Op("QuantizeLinear", {"x", "xs", "xz"}, {"xq"})
                .Op("DequantizeLinear", {"xq", "xs", "xz"}, {"xd"})
                .Op("DequantizeLinear", {"cwq", "cws", "cwz"}, {"cwd"}, Attrs({{"axis", Attribute::Int(0)}}))
                .Op("Conv", {"xd", "cwd"}, {"c"}, Attrs({{"pads", Attribute::Ints({1, 1, 1, 1})}}))
                .Op("QuantizeLinear", {"c", "s1", "z1"}, {"cq"})
                .Op("DequantizeLinear", {"cq", "s1", "z1"}, {"cd"})
                .Op("MaxPool", {"cd"}, {"p"}, Attrs({{"kernel_shape", Attribute::Ints({2, 2})}, {"strides", Attribute::Ints({2, 2})}}))
                // Equal values in other initializers still count as equal parameters.
                .Op("QuantizeLinear", {"p", "s1b", "z1b"}, {"pq"})
                .Op("DequantizeLinear", {"pq", "s1b", "z1b"}, {"pd"})
                .Op("Flatten", {"pd"}, {"f"})
                .Op("QuantizeLinear", {"f", "s1", "z1"}, {"fq"})
                .Op("DequantizeLinear", {"fq", "s1", "z1"}, {"fd"})
                .Op("DequantizeLinear", {"gwq", "gws", "gwz"}, {"gwd"}, Attrs({{"axis", Attribute::Int(0)}}))
                .Op("Gemm", {"fd", "gwd"}, {"logits"}, Attrs({{"transB", Attribute::Int(1)}}))
                .Output("logits")
                .Build();
  Compared c = RunBoth(g, Image({3, 1, 8, 8}, 63));
  ASSERT_EQ(c.fused.size(), 1u);
  EXPECT_EQ(testing::CountOps(c.fused_graph, "QConv"), 1);
  EXPECT_EQ(testing::CountOps(c.fused_graph, "QGemm"), 1);
  EXPECT_EQ(testing::CountOps(c.fused_graph, "DequantizeLinear"), 0);
  EXPECT_EQ(testing::CountOps(c.fused_graph, "QuantizeLinear"), 1);  // the input's
  // The MaxPool moved onto the conv's bytes and then into the conv (fuse_qconv_pool).
  EXPECT_EQ(testing::CountOps(c.fused_graph, "MaxPool"), 0);
  for (const Node& n : c.fused_graph.nodes()) {
    if (n.op_type == "QConv") {
      EXPECT_EQ(n.attrs.GetInts("_max_pool"), (std::vector<int64_t>{2, 2}));
    }
    if (n.op_type == "Flatten") {
      EXPECT_EQ(c.fused_graph.value(n.inputs[0]).dtype, DType::kUInt8);
    }
  }
  // Float logits: the conv output may differ by one quantum s1 in a few places, which moves a
  // logit by at most sum_k |w[n,k]| * s1.
  EXPECT_LT(testing::MaxAbsDiff(c.fused[0], c.emulated[0]), 0.5f);
  float max_abs = 0;
  for (int64_t i = 0; i < c.emulated[0].numel(); ++i) max_abs = std::max(max_abs, std::fabs(c.emulated[0].data<float>()[i]));
  EXPECT_GT(max_abs, 0.1f);
}

// x -> Q -> DQ -> Conv -> Relu -> Q -> DQ -> MaxPool(attrs) -> Q -> [DQ]: the int8 conv with a
// pool after it, as quantize_static writes it.
Graph ConvPoolGraph(const AttributeMap& pool_attrs, bool second_reader = false) {
  QWeight cw = QuantizeWeight(RandomFloat({8, 4, 3, 3}, 71), 0);
  GraphBuilder gb(13);
  gb.Input("x", DType::kFloat32, {Dim::Symbol("batch"), 4, 12, 11})
      .Init("xs", Tensor::Scalar<float>(kXScale)).Init("xz", Tensor::Scalar<uint8_t>(0))
      .Init("cwq", cw.q).Init("cws", cw.scale).Init("cwz", cw.zp)
      .Init("s1", Tensor::Scalar<float>(0.01f)).Init("z1", Tensor::Scalar<uint8_t>(0))
      .Op("QuantizeLinear", {"x", "xs", "xz"}, {"xq"})
      .Op("DequantizeLinear", {"xq", "xs", "xz"}, {"xd"})
      .Op("DequantizeLinear", {"cwq", "cws", "cwz"}, {"cwd"}, Attrs({{"axis", Attribute::Int(0)}}))
      .Op("Conv", {"xd", "cwd"}, {"c"}, Attrs({{"pads", Attribute::Ints({1, 1, 1, 1})}}))
      .Op("Relu", {"c"}, {"r"})
      .Op("QuantizeLinear", {"r", "s1", "z1"}, {"rq"})
      .Op("DequantizeLinear", {"rq", "s1", "z1"}, {"rd"})
      .Op("MaxPool", {"rd"}, {"p"}, pool_attrs)
      .Op("QuantizeLinear", {"p", "s1", "z1"}, {"pq"})
      .Op("DequantizeLinear", {"pq", "s1", "z1"}, {"pd"})
      .Output("pd");
  if (second_reader) gb.Output("rd");
  return gb.Build();
}

TEST(QdqFusion, MaxPoolAfterInt8ConvIsFusedIntoIt) {
  struct Case {
    AttributeMap attrs;
    bool second_reader;
    bool fused;
    const char* what;
  };
  const std::vector<Case> cases = {
      {Attrs({{"kernel_shape", Attribute::Ints({2, 2})}, {"strides", Attribute::Ints({2, 2})}}), false, true,
       "2x2 stride 2 (11 columns: the last one dropped)"},
      {Attrs({{"kernel_shape", Attribute::Ints({3, 2})}, {"strides", Attribute::Ints({3, 2})},
              {"auto_pad", Attribute::String("VALID")}}),
       false, true, "3x2 stride 3x2, VALID"},
      {Attrs({{"kernel_shape", Attribute::Ints({2, 2})}, {"strides", Attribute::Ints({1, 1})}}), false, false,
       "overlapping windows"},
      {Attrs({{"kernel_shape", Attribute::Ints({2, 2})}, {"strides", Attribute::Ints({2, 2})},
              {"pads", Attribute::Ints({1, 1, 1, 1})}}),
       false, false, "padded"},
      {Attrs({{"kernel_shape", Attribute::Ints({2, 2})}, {"strides", Attribute::Ints({2, 2})},
              {"ceil_mode", Attribute::Int(1)}}),
       false, false, "ceil mode"},
      {Attrs({{"kernel_shape", Attribute::Ints({2, 2})}, {"strides", Attribute::Ints({2, 2})}}), true, false,
       "conv output also a graph output"},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.what);
    Graph g = ConvPoolGraph(k.attrs, k.second_reader);
    const auto inputs = Image({3, 4, 12, 11}, 72);
    Compared c = RunBoth(g, inputs);
    ASSERT_FALSE(c.fused.empty());
    EXPECT_EQ(testing::CountOps(c.fused_graph, "QConv"), 1);
    EXPECT_EQ(testing::CountOps(c.fused_graph, "MaxPool"), k.fused ? 0 : 1);
    // Against the float emulation: the pooled values within one quantum (0.01).
    EXPECT_LE(testing::MaxAbsDiff(c.fused[0], c.emulated[0]), 0.0101f);
    if (!k.fused) continue;
    // The fused conv gives the bytes of the unfused pair: the same graph with the conv's output
    // also read as a graph output keeps its MaxPool (and the same weights: same seeds).
    Graph twin = ConvPoolGraph(k.attrs, true);
    for (Backend b : {Backend::kReference, Backend::kCpu}) {
      auto fused = Session::FromGraph(g, {.backend = b, .optimize = true});
      auto unfused = Session::FromGraph(twin, {.backend = b, .optimize = true});
      ASSERT_TRUE(fused.ok() && unfused.ok());
      EXPECT_EQ(testing::CountOps(SessionGraph(**unfused), "MaxPool"), 1);
      auto a = (*fused)->Run(inputs);
      auto u = (*unfused)->Run(inputs);
      ASSERT_TRUE(a.ok() && u.ok());
      EXPECT_TRUE(testing::TensorsClose((*a)[0], (*u)[0], 0.f, 0.f)) << BackendName(b);
    }
  }
}

TEST(QdqFusion, RewriteReportCountsFusions) {
  Graph g = ConvGraph(true);
  RegisterAllOps();
  ASSERT_TRUE(InferShapes(g).ok());
  auto r = RewriteForRuntime(g);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->fused_qdq, 1);
  EXPECT_EQ(r->folded_constants, 0);  // nothing left to fold: the weight stayed int8
}

}  // namespace
}  // namespace whittle
