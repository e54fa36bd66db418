// Conv and ConvTranspose kernels: the reference against hand-computed values (the ONNX examples),
// the CPU kernels against the reference over groups, depthwise, strides, pads, dilations,
// auto_pad, output_padding/output_shape, 1-D/3-D, constant weights and fused activations; errors.
#include <gtest/gtest.h>

#include "kernels/cpu/conv.h"

#include <string>
#include <vector>

#include "tests/util/test_util.h"

namespace whittle {
namespace {

using ::whittle::testing::ExpectBackendsMatchReference;
using ::whittle::testing::MakeNode;
using ::whittle::testing::RandomFloat;

Tensor Iota(const Dims& dims) {
  Tensor t(DType::kFloat32, dims);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(i);
  return t;
}

Tensor Ones(const Dims& dims) {
  Tensor t(DType::kFloat32, dims);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = 1.f;
  return t;
}

AttributeMap Attrs(std::vector<std::pair<std::string, Attribute>> kv) {
  AttributeMap m;
  for (auto& [k, v] : kv) m.Set(k, v);
  return m;
}

std::vector<float> Values(const Tensor& t) { return std::vector<float>(t.data<float>(), t.data<float>() + t.numel()); }

TEST(ConvReference, BasicWithAndWithoutPadding) {
  // ONNX test_basic_conv_with_padding / _without_padding: 5x5 ramp, 3x3 ones.
  const Tensor x = Iota({1, 1, 5, 5}), w = Ones({1, 1, 3, 3});
  for (Backend p : ::whittle::testing::TestedBackends()) {
    auto padded = RunNode(MakeNode("Conv", 2, 1, Attrs({{"kernel_shape", Attribute::Ints({3, 3})},
                                                         {"pads", Attribute::Ints({1, 1, 1, 1})}})),
                          17, {x, w}, p);
    ASSERT_TRUE(padded.ok()) << padded.status().message();
    EXPECT_EQ((*padded)[0].dims(), (Dims{1, 1, 5, 5}));
    EXPECT_EQ(Values((*padded)[0]),
              (std::vector<float>{12, 21, 27, 33, 24, 33, 54, 63, 72, 51, 63, 99, 108, 117, 81,
                                  93, 144, 153, 162, 111, 72, 111, 117, 123, 84}));
    auto valid = RunNode(MakeNode("Conv", 2, 1), 17, {x, w}, p);
    ASSERT_TRUE(valid.ok()) << valid.status().message();
    EXPECT_EQ(Values((*valid)[0]), (std::vector<float>{54, 63, 72, 99, 108, 117, 144, 153, 162}));
  }
}

TEST(ConvReference, StridesAsymmetricPadsBiasAndGroups) {
  // test_conv_with_strides_and_asymmetric_padding: 7x5 ramp, pads (1,0,1,0), stride 2 -> 4x2.
  const Tensor x = Iota({1, 1, 7, 5}), w = Ones({1, 1, 3, 3});
  auto r = RunNode(MakeNode("Conv", 2, 1, Attrs({{"pads", Attribute::Ints({1, 0, 1, 0})},
                                                  {"strides", Attribute::Ints({2, 2})}})),
                   17, {x, w}, Backend::kReference);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ((*r)[0].dims(), (Dims{1, 1, 4, 2}));
  EXPECT_EQ(Values((*r)[0]), (std::vector<float>{21, 33, 99, 117, 189, 207, 171, 183}));
  // Two groups of one channel each, 1x1 kernels with weights 2 and 3, bias 10 and 20.
  const Tensor x2 = Tensor::FromVector<float>({1, 2, 1, 2}, {1, 2, 3, 4});
  const Tensor w2 = Tensor::FromVector<float>({2, 1, 1, 1}, {2, 3});
  const Tensor b2 = Tensor::FromVector<float>({2}, {10, 20});
  auto g = RunNode(MakeNode("Conv", 3, 1, Attrs({{"group", Attribute::Int(2)}})), 17, {x2, w2, b2},
                   Backend::kReference);
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(Values((*g)[0]), (std::vector<float>{12, 14, 29, 32}));
}

TEST(ConvReference, AutoPadSameLowerStride2) {
  // test_conv_with_autopad_same: 5x5 ramp, SAME_LOWER, stride 2 -> 3x3 with pads 1 on each side.
  auto r = RunNode(MakeNode("Conv", 2, 1, Attrs({{"auto_pad", Attribute::String("SAME_LOWER")},
                                                  {"kernel_shape", Attribute::Ints({3, 3})},
                                                  {"strides", Attribute::Ints({2, 2})}})),
                   17, {Iota({1, 1, 5, 5}), Ones({1, 1, 3, 3})}, Backend::kReference);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Values((*r)[0]), (std::vector<float>{12, 27, 24, 63, 108, 81, 72, 117, 84}));
}

struct ConvCase {
  std::string name;
  Dims x, w;
  bool bias;
  AttributeMap attrs;
};

std::vector<ConvCase> Cases() {
  std::vector<ConvCase> c;
  auto add = [&](std::string n, Dims x, Dims w, bool b, std::vector<std::pair<std::string, Attribute>> a) {
    c.push_back({std::move(n), std::move(x), std::move(w), b, Attrs(std::move(a))});
  };
  add("plain3x3", {2, 3, 9, 8}, {4, 3, 3, 3}, true, {});
  add("pad1_batch1", {1, 1, 28, 28}, {16, 1, 3, 3}, true, {{"pads", Attribute::Ints({1, 1, 1, 1})}});
  add("pad1_batch3", {3, 16, 14, 14}, {32, 16, 3, 3}, true, {{"pads", Attribute::Ints({1, 1, 1, 1})}});
  add("asym_pads_strides", {2, 3, 11, 9}, {5, 3, 3, 2}, true,
      {{"pads", Attribute::Ints({2, 0, 1, 1})}, {"strides", Attribute::Ints({2, 3})}});
  add("dilated", {1, 2, 12, 12}, {3, 2, 3, 3}, false,
      {{"dilations", Attribute::Ints({2, 3})}, {"pads", Attribute::Ints({1, 2, 1, 2})}});
  add("groups", {2, 6, 7, 7}, {4, 3, 3, 3}, true, {{"group", Attribute::Int(2)}});
  add("depthwise", {2, 4, 10, 9}, {4, 1, 3, 3}, true,
      {{"group", Attribute::Int(4)}, {"pads", Attribute::Ints({1, 1, 1, 1})}});
  add("depthwise_strided_dilated", {1, 3, 13, 11}, {3, 1, 3, 3}, true,
      {{"group", Attribute::Int(3)}, {"strides", Attribute::Ints({2, 2})}, {"dilations", Attribute::Ints({2, 1})},
       {"pads", Attribute::Ints({2, 1, 0, 1})}});
  add("depthwise_multiplier", {2, 3, 8, 8}, {6, 1, 3, 3}, false, {{"group", Attribute::Int(3)}});
  add("one_by_one", {2, 8, 5, 6}, {7, 8, 1, 1}, true, {});
  add("one_by_one_strided", {1, 4, 7, 7}, {3, 4, 1, 1}, true, {{"strides", Attribute::Ints({2, 2})}});
  add("same_upper", {1, 2, 7, 6}, {3, 2, 4, 3}, true,
      {{"auto_pad", Attribute::String("SAME_UPPER")}, {"strides", Attribute::Ints({2, 2})}});
  add("same_lower", {1, 2, 7, 6}, {3, 2, 4, 3}, true,
      {{"auto_pad", Attribute::String("SAME_LOWER")}, {"strides", Attribute::Ints({2, 1})}});
  add("valid", {1, 2, 7, 6}, {3, 2, 3, 3}, true,
      {{"auto_pad", Attribute::String("VALID")}, {"strides", Attribute::Ints({2, 2})}});
  add("conv1d", {2, 3, 20}, {4, 3, 5}, true, {{"pads", Attribute::Ints({2, 1})}, {"strides", Attribute::Ints({2})}});
  add("conv1d_groups_dilated", {1, 4, 16}, {4, 2, 3}, false,
      {{"group", Attribute::Int(2)}, {"dilations", Attribute::Ints({2})}});
  add("conv3d", {1, 2, 5, 6, 4}, {3, 2, 2, 3, 2}, true,
      {{"pads", Attribute::Ints({1, 0, 1, 0, 1, 0})}, {"strides", Attribute::Ints({1, 2, 1})}});
  add("conv3d_groups", {2, 4, 4, 4, 4}, {2, 2, 3, 3, 3}, true,
      {{"group", Attribute::Int(2)}, {"pads", Attribute::Ints({1, 1, 1, 1, 1, 1})}});
  add("kernel_shape_attr", {1, 3, 6, 6}, {2, 3, 3, 3}, true, {{"kernel_shape", Attribute::Ints({3, 3})}});
  add("wide_rows_split", {1, 2, 40, 33}, {8, 2, 3, 3}, true, {{"pads", Attribute::Ints({1, 1, 1, 1})}});
  return c;
}

TEST(ConvCpu, MatchesReference) {
  uint32_t seed = 10;
  for (const ConvCase& c : Cases()) {
    SCOPED_TRACE(c.name);
    std::vector<Tensor> in = {RandomFloat(c.x, seed++), RandomFloat(c.w, seed++)};
    if (c.bias) in.push_back(RandomFloat({c.w[0]}, seed++));
    const Node n = MakeNode("Conv", c.bias ? 3 : 2, 1, c.attrs);
    for (int threads : {1, 2}) {
      auto ref = ExpectBackendsMatchReference(n, in, 1e-4f, 1e-4f, 17, threads);
      ASSERT_EQ(ref.size(), 1u);
    }
    // Constant weights take the prepacked path.
    ExpectBackendsMatchReference(n, in, 1e-4f, 1e-4f, 17, 2, /*inputs_const=*/true);
  }
}

TEST(ConvCpu, FusedActivationsAfterBias) {
  const std::vector<Tensor> in = {RandomFloat({2, 3, 8, 8}, 1), RandomFloat({4, 3, 3, 3}, 2), RandomFloat({4}, 3)};
  const std::vector<Tensor> dw = {RandomFloat({1, 4, 8, 8}, 4), RandomFloat({4, 1, 3, 3}, 5), RandomFloat({4}, 6)};
  for (const char* act : {"Relu", "LeakyRelu", "Sigmoid", "Tanh", "Clip", "HardSigmoid", "HardSwish"}) {
    SCOPED_TRACE(act);
    AttributeMap a = Attrs({{"pads", Attribute::Ints({1, 1, 1, 1})}, {"_activation", Attribute::String(act)}});
    if (std::string(act) == "Clip") {
      a.Set("_min", Attribute::Float(-0.2f));
      a.Set("_max", Attribute::Float(0.3f));
    }
    auto fused = ExpectBackendsMatchReference(MakeNode("Conv", 3, 1, a), in, 1e-4f, 1e-4f);
    a.Set("group", Attribute::Int(4));
    ExpectBackendsMatchReference(MakeNode("Conv", 3, 1, a), dw, 1e-4f, 1e-4f);
    if (std::string(act) == "Relu") {
      ASSERT_EQ(fused.size(), 1u);
      auto plain = RunNode(MakeNode("Conv", 3, 1, Attrs({{"pads", Attribute::Ints({1, 1, 1, 1})}})), 17, in,
                           Backend::kReference);
      ASSERT_TRUE(plain.ok());
      const float* p = (*plain)[0].data<float>();
      const float* f = fused[0].data<float>();
      for (int64_t i = 0; i < fused[0].numel(); ++i) ASSERT_FLOAT_EQ(f[i], p[i] > 0 ? p[i] : 0.f);
    }
  }
}

// Every float path for constant 2-D weights, forced: the own one (im2col + Sgemm, direct
// depthwise), oneDNN's convolution primitive (conv_onednn.h) and the direct stride-1 kernel
// (conv_direct.h; shapes it does not take fall back to measuring), with every fused activation.
TEST(ConvCpu, EveryPathMatchesReference) {
  for (cpu::ConvPath path : {cpu::ConvPath::kOwn, cpu::ConvPath::kOneDnn, cpu::ConvPath::kDirect}) {
    cpu::SetConvPath(path);
    SCOPED_TRACE(path == cpu::ConvPath::kOwn ? "own" : path == cpu::ConvPath::kOneDnn ? "onednn" : "direct");
    uint32_t seed = 50;
    for (const ConvCase& c : Cases()) {
      SCOPED_TRACE(c.name);
      std::vector<Tensor> in = {RandomFloat(c.x, seed++), RandomFloat(c.w, seed++)};
      if (c.bias) in.push_back(RandomFloat({c.w[0]}, seed++));
      ExpectBackendsMatchReference(MakeNode("Conv", c.bias ? 3 : 2, 1, c.attrs), in, 1e-4f, 1e-4f, 17, 2,
                                   /*inputs_const=*/true);
    }
    const std::vector<Tensor> in = {RandomFloat({3, 5, 9, 9}, 1), RandomFloat({6, 5, 3, 3}, 2), RandomFloat({6}, 3)};
    for (const char* act : {"Relu", "LeakyRelu", "Sigmoid", "Tanh", "Clip", "HardSigmoid", "HardSwish"}) {
      SCOPED_TRACE(act);
      AttributeMap a = Attrs({{"pads", Attribute::Ints({1, 1, 1, 1})}, {"_activation", Attribute::String(act)},
                              {"_alpha", Attribute::Float(0.1f)}});
      if (std::string(act) == "Clip") {
        a.Set("_min", Attribute::Float(-0.2f));
        a.Set("_max", Attribute::Float(0.3f));
      }
      ExpectBackendsMatchReference(MakeNode("Conv", 3, 1, a), in, 1e-4f, 1e-4f, 17, 2, /*inputs_const=*/true);
    }
  }
  cpu::SetConvPath(cpu::ConvPath::kAuto);
}

TEST(ConvCpu, DoubleFallsBackToReference) {
  Tensor x(DType::kFloat64, {1, 1, 3, 3}), w(DType::kFloat64, {1, 1, 2, 2});
  for (int i = 0; i < 9; ++i) x.data<double>()[i] = i;
  for (int i = 0; i < 4; ++i) w.data<double>()[i] = 1;
  auto r = RunNode(MakeNode("Conv", 2, 1), 17, {x, w}, Backend::kCpu);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const double* y = (*r)[0].data<double>();
  EXPECT_EQ(std::vector<double>(y, y + 4), (std::vector<double>{8, 12, 20, 24}));
}

TEST(ConvCpu, RejectsBadShapes) {
  // 3 channels do not split into 2 groups.
  auto r = RunNode(MakeNode("Conv", 2, 1, Attrs({{"group", Attribute::Int(2)}})), 17,
                   {RandomFloat({1, 3, 5, 5}, 1), RandomFloat({4, 1, 3, 3}, 2)}, Backend::kCpu);
  EXPECT_FALSE(r.ok());
  // Bias with the wrong length.
  r = RunNode(MakeNode("Conv", 3, 1), 17, {RandomFloat({1, 1, 5, 5}, 1), RandomFloat({2, 1, 3, 3}, 2),
                                           RandomFloat({3}, 3)}, Backend::kCpu);
  EXPECT_FALSE(r.ok());
}

// ---- ConvTranspose ----

TEST(ConvTransposeReference, OnnxExamples) {
  // ONNX test_convtranspose: 3x3 ramp, W (1, 2, 3, 3) of ones -> (1, 2, 5, 5).
  const Tensor x = Iota({1, 1, 3, 3}), w = Ones({1, 2, 3, 3});
  const std::vector<float> plane = {0, 1, 3, 3, 2, 3, 8, 15, 12, 7, 9, 21, 36, 27, 15,
                                    9, 20, 33, 24, 13, 6, 13, 21, 15, 8};
  for (Backend p : ::whittle::testing::TestedBackends()) {
    SCOPED_TRACE(BackendName(p));
    auto r = RunNode(MakeNode("ConvTranspose", 2, 1), 17, {x, w}, p);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ((*r)[0].dims(), (Dims{1, 2, 5, 5}));
    std::vector<float> both = plane;
    both.insert(both.end(), plane.begin(), plane.end());
    EXPECT_EQ(Values((*r)[0]), both);
    // test_convtranspose_pads: strides (3, 2), pads (1, 2, 1, 2) -> 7x3.
    r = RunNode(MakeNode("ConvTranspose", 2, 1, Attrs({{"strides", Attribute::Ints({3, 2})},
                                                       {"pads", Attribute::Ints({1, 2, 1, 2})}})),
                17, {x, w}, p);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ((*r)[0].dims(), (Dims{1, 2, 7, 3}));
    const std::vector<float> pads_plane = {1, 1, 3, 1, 1, 3, 7, 4, 9, 7, 4, 9, 7, 4, 9, 13, 7, 15, 13, 7, 15};
    const std::vector<float> pv = Values((*r)[0]);
    EXPECT_EQ(std::vector<float>(pv.begin(), pv.begin() + 21), pads_plane);
    // output_shape one larger than the natural size in both dims adds a zero row and column at the
    // end (test_convtranspose_output_shape); output_padding (1, 1) gives the same result.
    for (const char* how : {"output_shape", "output_padding"}) {
      SCOPED_TRACE(how);
      AttributeMap a = Attrs({{"strides", Attribute::Ints({3, 2})}});
      if (std::string(how) == "output_shape") a.Set("output_shape", Attribute::Ints({10, 8}));
      else a.Set("output_padding", Attribute::Ints({1, 1}));
      r = RunNode(MakeNode("ConvTranspose", 2, 1, a), 17, {x, w}, p);
      ASSERT_TRUE(r.ok()) << r.status().message();
      ASSERT_EQ((*r)[0].dims(), (Dims{1, 2, 10, 8}));
      const std::vector<float> v = Values((*r)[0]);
      EXPECT_EQ(std::vector<float>(v.begin(), v.begin() + 8), (std::vector<float>{0, 0, 1, 1, 3, 2, 2, 0}));
      EXPECT_EQ(std::vector<float>(v.begin() + 72, v.begin() + 80), (std::vector<float>(8, 0.f)));
      EXPECT_EQ(v[8 * 8 + 2], 13.f);
    }
  }
}

TEST(ConvTransposeReference, OneDimensionalStrideDilationGroupsBias) {
  // x = [1, 2], w = [1, 10]: stride 2 interleaves the two copies, dilation 2 overlaps them.
  const Tensor x = Tensor::FromVector<float>({1, 1, 2}, {1, 2});
  const Tensor w = Tensor::FromVector<float>({1, 1, 2}, {1, 10});
  auto r = RunNode(MakeNode("ConvTranspose", 2, 1, Attrs({{"strides", Attribute::Ints({2})}})), 17, {x, w},
                   Backend::kReference);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Values((*r)[0]), (std::vector<float>{1, 10, 2, 20}));
  r = RunNode(MakeNode("ConvTranspose", 2, 1, Attrs({{"dilations", Attribute::Ints({2})}})), 17, {x, w},
              Backend::kReference);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Values((*r)[0]), (std::vector<float>{1, 2, 10, 20}));
  // Two groups, each one input channel -> two output channels (W is [C, M/group, k]), bias per
  // output channel: channel m of group g only sees input channel g.
  const Tensor x2 = Tensor::FromVector<float>({1, 2, 1}, {1, 2});
  const Tensor w2 = Tensor::FromVector<float>({2, 2, 1}, {1, 2, 3, 4});
  const Tensor b2 = Tensor::FromVector<float>({4}, {0, 10, 20, 30});
  r = RunNode(MakeNode("ConvTranspose", 3, 1, Attrs({{"group", Attribute::Int(2)}})), 17, {x2, w2, b2},
              Backend::kReference);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ((*r)[0].dims(), (Dims{1, 4, 1}));
  EXPECT_EQ(Values((*r)[0]), (std::vector<float>{1, 12, 26, 38}));
}

TEST(ConvTransposeReference, AutoPadSameUpperAndLower) {
  // test_convtranspose_autopad_same: 3x3 -> 6x6 with stride 2; total padding 1 goes to the end for
  // SAME_UPPER and to the start for SAME_LOWER.
  const Tensor x = Iota({1, 1, 3, 3}), w = Ones({1, 1, 3, 3});
  auto upper = RunNode(MakeNode("ConvTranspose", 2, 1, Attrs({{"auto_pad", Attribute::String("SAME_UPPER")},
                                                             {"strides", Attribute::Ints({2, 2})}})),
                       17, {x, w}, Backend::kReference);
  ASSERT_TRUE(upper.ok()) << upper.status().message();
  ASSERT_EQ((*upper)[0].dims(), (Dims{1, 1, 6, 6}));
  const std::vector<float> u = Values((*upper)[0]);
  EXPECT_EQ(std::vector<float>(u.begin(), u.begin() + 6), (std::vector<float>{0, 0, 1, 1, 3, 2}));
  EXPECT_EQ(std::vector<float>(u.begin() + 12, u.begin() + 18), (std::vector<float>{3, 3, 8, 5, 12, 7}));
  auto lower = RunNode(MakeNode("ConvTranspose", 2, 1, Attrs({{"auto_pad", Attribute::String("SAME_LOWER")},
                                                             {"strides", Attribute::Ints({2, 2})}})),
                       17, {x, w}, Backend::kReference);
  ASSERT_TRUE(lower.ok()) << lower.status().message();
  const std::vector<float> l = Values((*lower)[0]);
  EXPECT_EQ(std::vector<float>(l.begin(), l.begin() + 6), (std::vector<float>{0, 1, 1, 3, 2, 2}));
}

TEST(ConvTransposeCpu, MatchesReference) {
  struct Case {
    std::string name;
    Dims x, w;
    bool bias;
    std::vector<std::pair<std::string, Attribute>> attrs;
  };
  const std::vector<Case> cases = {
      {"plain", {2, 3, 5, 4}, {3, 4, 3, 3}, true, {}},
      {"stride2_pads_outpad", {1, 4, 6, 5}, {4, 3, 4, 4}, true,
       {{"strides", Attribute::Ints({2, 2})}, {"pads", Attribute::Ints({1, 1, 1, 1})},
        {"output_padding", Attribute::Ints({1, 0})}}},
      {"stride3x2_asym", {1, 2, 4, 5}, {2, 3, 3, 2}, false,
       {{"strides", Attribute::Ints({3, 2})}, {"pads", Attribute::Ints({0, 1, 2, 0})}}},
      {"dilated", {2, 2, 5, 5}, {2, 2, 3, 3}, true, {{"dilations", Attribute::Ints({2, 3})}}},
      {"groups", {2, 6, 4, 4}, {6, 2, 3, 3}, true,
       {{"group", Attribute::Int(3)}, {"strides", Attribute::Ints({2, 2})}}},
      {"depthwise", {1, 4, 5, 6}, {4, 1, 2, 2}, true,
       {{"group", Attribute::Int(4)}, {"strides", Attribute::Ints({2, 2})}}},
      {"same_upper", {1, 3, 5, 4}, {3, 2, 3, 3}, true,
       {{"auto_pad", Attribute::String("SAME_UPPER")}, {"strides", Attribute::Ints({2, 2})}}},
      {"same_lower", {1, 3, 5, 4}, {3, 2, 4, 3}, true,
       {{"auto_pad", Attribute::String("SAME_LOWER")}, {"strides", Attribute::Ints({2, 3})}}},
      {"output_shape_larger", {1, 2, 3, 3}, {2, 2, 3, 3}, true,
       {{"strides", Attribute::Ints({2, 2})}, {"output_shape", Attribute::Ints({9, 10})}}},
      {"output_shape_smaller", {1, 2, 4, 4}, {2, 2, 3, 3}, false,
       {{"strides", Attribute::Ints({2, 2})}, {"output_shape", Attribute::Ints({1, 2, 7, 8})}}},
      {"segmenter_upsample", {1, 16, 12, 12}, {16, 8, 4, 4}, true,
       {{"strides", Attribute::Ints({2, 2})}, {"pads", Attribute::Ints({1, 1, 1, 1})}}},
      {"conv1d", {2, 3, 7}, {3, 2, 3}, true,
       {{"strides", Attribute::Ints({2})}, {"pads", Attribute::Ints({1, 0})}, {"output_padding", Attribute::Ints({1})}}},
      {"conv3d", {1, 2, 3, 4, 3}, {2, 2, 2, 3, 2}, true,
       {{"strides", Attribute::Ints({2, 1, 2})}, {"pads", Attribute::Ints({0, 1, 0, 1, 0, 0})}}},
      {"conv3d_groups_dilated", {1, 4, 3, 3, 3}, {4, 1, 2, 2, 2}, false,
       {{"group", Attribute::Int(2)}, {"dilations", Attribute::Ints({2, 1, 2})}}},
  };
  uint32_t seed = 100;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<Tensor> in = {RandomFloat(c.x, seed++), RandomFloat(c.w, seed++)};
    const int64_t group = Attrs(c.attrs).GetInt("group", 1);
    if (c.bias) in.push_back(RandomFloat({c.w[1] * group}, seed++));
    const Node n = MakeNode("ConvTranspose", c.bias ? 3 : 2, 1, Attrs(c.attrs));
    for (int threads : {1, 2}) ASSERT_EQ(ExpectBackendsMatchReference(n, in, 1e-4f, 1e-4f, 17, threads).size(), 1u);
    ExpectBackendsMatchReference(n, in, 1e-4f, 1e-4f, 17, 2, /*inputs_const=*/true);
  }
}

TEST(ConvTranspose, DoubleUsesReference) {
  Tensor x(DType::kFloat64, {1, 1, 2}), w(DType::kFloat64, {1, 1, 2});
  x.data<double>()[0] = 1;
  x.data<double>()[1] = 2;
  w.data<double>()[0] = 1;
  w.data<double>()[1] = 10;
  auto r = RunNode(MakeNode("ConvTranspose", 2, 1), 17, {x, w}, Backend::kCpu);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const double* y = (*r)[0].data<double>();
  EXPECT_EQ(std::vector<double>(y, y + 3), (std::vector<double>{1, 12, 20}));
}

TEST(ConvTranspose, RejectsBadAttributesAndShapes) {
  const std::vector<Tensor> in = {RandomFloat({1, 2, 3, 3}, 1), RandomFloat({2, 3, 3, 3}, 2)};
  auto expect_error = [&](std::vector<std::pair<std::string, Attribute>> a, const std::vector<Tensor>& inputs,
                          const std::string& needle) {
    auto r = RunNode(MakeNode("ConvTranspose", static_cast<int>(inputs.size()), 1, Attrs(std::move(a))), 17, inputs,
                     Backend::kCpu);
    ASSERT_FALSE(r.ok()) << needle;
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
    EXPECT_EQ(r.status().message().find('\n'), std::string::npos) << r.status().message();
  };
  expect_error({{"output_padding", Attribute::Ints({-1, 0})}}, in, "output_padding");
  expect_error({{"output_padding", Attribute::Ints({1, 1, 1})}}, in, "output_padding");
  expect_error({{"output_shape", Attribute::Ints({5, 0})}}, in, "output_shape");
  expect_error({{"output_shape", Attribute::Ints({5, 5, 5})}}, in, "output_shape");
  expect_error({{"strides", Attribute::Ints({0, 1})}}, in, "strides");
  expect_error({{"group", Attribute::Int(0)}}, in, "group");
  expect_error({{"group", Attribute::Int(3)}}, in, "group");
  expect_error({{"kernel_shape", Attribute::Ints({2, 2})}}, in, "kernel_shape");
  expect_error({{"pads", Attribute::Ints({3, 3, 3, 3})}}, in, "pads");
  expect_error({}, {RandomFloat({1, 3, 3, 3}, 1), RandomFloat({2, 3, 3, 3}, 2)}, "channels");
  expect_error({}, {RandomFloat({1, 2, 3, 3}, 1), RandomFloat({2, 3, 3, 3}, 2), RandomFloat({2}, 3)}, "B");
}

}  // namespace
}  // namespace whittle
