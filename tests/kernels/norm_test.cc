// BatchNormalization, LayerNormalization, InstanceNormalization and GroupNormalization kernels:
// hand-computed and numpy-computed values, CPU against the reference, and the restrictions.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/util/test_util.h"

namespace whittle {
namespace {

using ::whittle::testing::ExpectBackendsMatchReference;
using ::whittle::testing::MakeNode;
using ::whittle::testing::RandomFloat;

AttributeMap Attrs(std::vector<std::pair<std::string, Attribute>> kv) {
  AttributeMap m;
  for (auto& [k, v] : kv) m.Set(k, v);
  return m;
}

std::vector<float> Values(const Tensor& t) { return std::vector<float>(t.data<float>(), t.data<float>() + t.numel()); }

std::vector<Tensor> BnInputs(const Dims& x, int64_t c, uint32_t seed) {
  return {RandomFloat(x, seed), RandomFloat({c}, seed + 1), RandomFloat({c}, seed + 2),
          RandomFloat({c}, seed + 3), RandomFloat({c}, seed + 4, 0.1f, 2.f)};
}

TEST(BatchNormReference, HandComputed) {
  const std::vector<Tensor> in = {Tensor::FromVector<float>({1, 2, 1, 2}, {1, 2, 3, 4}),
                                  Tensor::FromVector<float>({2}, {1, 2}), Tensor::FromVector<float>({2}, {0, 1}),
                                  Tensor::FromVector<float>({2}, {1, 3}), Tensor::FromVector<float>({2}, {4, 1})};
  for (Backend p : ::whittle::testing::TestedBackends()) {
    for (bool konst : {false, true}) {
      auto r = RunNode(MakeNode("BatchNormalization", 5, 1, Attrs({{"epsilon", Attribute::Float(0.f)}})), 15, in, p,
                       1, konst);
      ASSERT_TRUE(r.ok()) << r.status().message();
      EXPECT_EQ(Values((*r)[0]), (std::vector<float>{0, 0.5f, 1, 3}));
    }
  }
}

TEST(BatchNormCpu, MatchesReference) {
  const std::vector<Dims> shapes = {{4, 3}, {2, 5, 7}, {2, 3, 9, 8}, {64, 16, 28, 28}, {1, 2, 3, 4, 5}};
  uint32_t seed = 1;
  for (const Dims& d : shapes) {
    SCOPED_TRACE(DimsToString(d));
    const auto in = BnInputs(d, d[1], seed);
    seed += 10;
    const Node n = MakeNode("BatchNormalization", 5, 1, Attrs({{"epsilon", Attribute::Float(1e-3f)}}));
    ExpectBackendsMatchReference(n, in, 1e-5f, 1e-4f);
    ExpectBackendsMatchReference(n, in, 1e-5f, 1e-4f, 17, 2, /*inputs_const=*/true);
  }
}

TEST(BatchNorm, SpatialZeroInOldOpsets) {
  // opset 7, spatial=0: one parameter per element of X.shape[1:].
  const Tensor x = RandomFloat({2, 2, 3}, 1);
  const Tensor s = RandomFloat({2, 3}, 2), b = RandomFloat({2, 3}, 3), m = RandomFloat({2, 3}, 4);
  const Tensor v = RandomFloat({2, 3}, 5, 0.5f, 1.5f);
  const Node n = MakeNode("BatchNormalization", 5, 1, Attrs({{"spatial", Attribute::Int(0)}, {"epsilon", Attribute::Float(0.f)}}));
  auto r = RunNode(n, 7, {x, s, b, m, v}, Backend::kCpu);
  ASSERT_TRUE(r.ok()) << r.status().message();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int64_t p = i % 6;
    const float want = (x.data<float>()[i] - m.data<float>()[p]) / std::sqrt(v.data<float>()[p]) * s.data<float>()[p] +
                       b.data<float>()[p];
    EXPECT_NEAR((*r)[0].data<float>()[i], want, 1e-5f);
  }
}

TEST(BatchNorm, OpsetSixIsTestIsInference) {
  // Opset 6 with is_test=1 is inference and runs (training: norm_training_test.cc).
  const auto in = BnInputs({2, 3, 4, 5}, 3, 1);
  auto r = RunNode(MakeNode("BatchNormalization", 5, 1, Attrs({{"is_test", Attribute::Int(1)}})), 6, in, Backend::kCpu);
  EXPECT_TRUE(r.ok()) << r.status().message();
}

TEST(BatchNorm, DoubleUsesReference) {
  std::vector<Tensor> in;
  in.push_back(Tensor::FromVector<double>({1, 1, 2}, {1, 3}));
  for (double v : {2.0, 1.0, 2.0, 1.0}) in.push_back(Tensor::FromVector<double>({1}, {v}));
  auto r = RunNode(MakeNode("BatchNormalization", 5, 1, Attrs({{"epsilon", Attribute::Float(0.f)}})), 15, in,
                   Backend::kCpu);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_DOUBLE_EQ((*r)[0].data<double>()[0], -1.0);  // (1-2)*2+1
  EXPECT_DOUBLE_EQ((*r)[0].data<double>()[1], 3.0);   // (3-2)*2+1
}

TEST(LayerNormReference, HandComputedWithStatistics) {
  const Tensor x = Tensor::FromVector<float>({2, 4}, {1, 2, 3, 4, 2, 2, 2, 6});
  const Tensor s = Tensor::FromVector<float>({4}, {1, 1, 2, 2});
  const Tensor b = Tensor::FromVector<float>({4}, {0, 0, 0, 1});
  for (Backend p : ::whittle::testing::TestedBackends()) {
    auto r = RunNode(MakeNode("LayerNormalization", 3, 3, Attrs({{"epsilon", Attribute::Float(0.f)}})), 17, {x, s, b}, p);
    ASSERT_TRUE(r.ok()) << r.status().message();
    // Row 0: mean 2.5, var 1.25; row 1: mean 3, var 3.
    const float i0 = 1.f / std::sqrt(1.25f), i1 = 1.f / std::sqrt(3.f);
    const std::vector<float> want = {-1.5f * i0, -0.5f * i0, 2 * 0.5f * i0, 2 * 1.5f * i0 + 1,
                                     -i1,        -i1,        -2 * i1,       2 * 3 * i1 + 1};
    for (int i = 0; i < 8; ++i) EXPECT_NEAR((*r)[0].data<float>()[i], want[static_cast<size_t>(i)], 1e-5f);
    EXPECT_EQ((*r)[1].dims(), (Dims{2, 1}));
    EXPECT_EQ((*r)[1].dtype(), DType::kFloat32);
    EXPECT_NEAR((*r)[1].data<float>()[0], 2.5f, 1e-6f);
    EXPECT_NEAR((*r)[1].data<float>()[1], 3.f, 1e-6f);
    EXPECT_NEAR((*r)[2].data<float>()[0], i0, 1e-6f);
    EXPECT_NEAR((*r)[2].data<float>()[1], i1, 1e-6f);
  }
}

TEST(LayerNormCpu, MatchesReference) {
  struct Case {
    Dims x;
    int64_t axis;
    Dims scale;
    bool bias;
    int outputs;
  } cases[] = {{{2, 3, 4, 5}, -1, {5}, true, 3},     {{2, 3, 4, 5}, 1, {3, 4, 5}, true, 1},
               {{2, 3, 4, 5}, 0, {2, 3, 4, 5}, false, 2}, {{3, 4}, -2, {3, 4}, true, 3},
               {{8, 16, 64}, 2, {1, 64}, true, 1},  {{4, 6}, 1, {1}, true, 3},
               // a single Scale and B value, one output (the CUDA kernel expands them first)
               {{2, 3, 4, 5}, 1, {1}, true, 1},  {{4, 6}, 1, {1}, false, 1}};
  uint32_t seed = 1;
  for (const Case& c : cases) {
    SCOPED_TRACE(DimsToString(c.x) + " axis " + std::to_string(c.axis));
    std::vector<Tensor> in = {RandomFloat(c.x, seed++, -3.f, 3.f), RandomFloat(c.scale, seed++)};
    if (c.bias) in.push_back(RandomFloat(c.scale, seed++));
    const Node n = MakeNode("LayerNormalization", static_cast<int>(in.size()), c.outputs,
                            Attrs({{"axis", Attribute::Int(c.axis)}, {"epsilon", Attribute::Float(1e-3f)}}));
    auto out = ExpectBackendsMatchReference(n, in, 1e-4f, 1e-4f);
    EXPECT_EQ(out.size(), static_cast<size_t>(c.outputs));
  }
}

TEST(LayerNorm, RejectsUnsupportedStashTypeAndBadAxis) {
  const std::vector<Tensor> in = {RandomFloat({2, 3}, 1), RandomFloat({3}, 2)};
  auto r = RunNode(MakeNode("LayerNormalization", 2, 1, Attrs({{"stash_type", Attribute::Int(11)}})), 17, in,
                   Backend::kCpu);
  EXPECT_FALSE(r.ok());
  r = RunNode(MakeNode("LayerNormalization", 2, 1, Attrs({{"axis", Attribute::Int(2)}})), 17, in, Backend::kCpu);
  EXPECT_FALSE(r.ok());
  // Scale that is not X.shape[axis:].
  r = RunNode(MakeNode("LayerNormalization", 2, 1), 17, {RandomFloat({2, 3}, 1), RandomFloat({2}, 2)}, Backend::kCpu);
  EXPECT_FALSE(r.ok());
}

// ---- InstanceNormalization and GroupNormalization ----

// x [2, 4, 3] and expected outputs computed with numpy (statistics in float64, as
// onnx/backend/test/case/node/groupnormalization.py computes them).
const std::vector<float> kNormX = {-3, -2, -0.171573f, 2.19615f, -2, 1.18034f, -2.30306f, 1.52026f,
                                   -1.37258f, 3, 0.622776f, -1.51713f, 3.56922f, 1.87217f, 0.383202f, -0.905251f,
                                   -2, -2.9072f, 3.36753f, 2.81908f, 2.44272f, 2.23409f, 2.18915f, 2.30412f};

void ExpectNear(const Tensor& t, const std::vector<float>& want, float tol) {
  ASSERT_EQ(t.numel(), static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(t.data<float>()[i], want[i], tol) << "element " << i;
}

TEST(InstanceNormReference, HandComputedAndNumpy) {
  // Channel 0 = [1, 3] (mean 2, var 1), channel 1 = [0, 4] (mean 2, var 4); epsilon 0.
  const std::vector<Tensor> in = {Tensor::FromVector<float>({1, 2, 2}, {1, 3, 0, 4}),
                                  Tensor::FromVector<float>({2}, {2, 1}), Tensor::FromVector<float>({2}, {0.5f, 0})};
  for (Backend p : ::whittle::testing::TestedBackends()) {
    auto r = RunNode(MakeNode("InstanceNormalization", 3, 1, Attrs({{"epsilon", Attribute::Float(0.f)}})), 17, in, p);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(Values((*r)[0]), (std::vector<float>{-1.5f, 2.5f, -1, 1}));
  }
  const std::vector<Tensor> in2 = {Tensor::FromVector<float>({2, 4, 3}, kNormX),
                                   Tensor::FromVector<float>({4}, {0.5f, -1, 2, 1.5f}),
                                   Tensor::FromVector<float>({4}, {0, 1, -1, 0.25f})};
  auto r = RunNode(MakeNode("InstanceNormalization", 3, 1), 7, in2, Backend::kReference);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ExpectNear((*r)[0], {-0.54484868f, -0.1178989f, 0.66274756f, 0.028035397f, 2.375622f, 0.59634256f,
                       -2.9467351f, 1.7503437f, -1.8036087f, 2.1184278f, 0.18568483f, -1.5541124f,
                       0.62525779f, -0.026644101f, -0.59861368f, -0.26113805f, 1.0763798f, 2.1847582f,
                       1.5864506f, -1.3021203f, -3.2843304f, -0.014589916f, -1.4363531f, 2.200943f},
             1e-5f);
}

TEST(GroupNormReference, PerGroupAffineInOpset18PerChannelIn21) {
  // x = [1, 3, 0, 4], two groups of two channels: both normalise to [-1, 1] with epsilon 0.
  const Tensor x = Tensor::FromVector<float>({1, 4, 1}, {1, 3, 0, 4});
  const Node n = MakeNode("GroupNormalization", 3, 1,
                          Attrs({{"num_groups", Attribute::Int(2)}, {"epsilon", Attribute::Float(0.f)}}));
  auto r21 = RunNode(n, 21, {x, Tensor::FromVector<float>({4}, {1, 2, 3, 4}), Tensor::FromVector<float>({4}, {0, 0, 0, 1})},
                     Backend::kReference);
  ASSERT_TRUE(r21.ok()) << r21.status().message();
  EXPECT_EQ(Values((*r21)[0]), (std::vector<float>{-1, 2, -3, 5}));
  auto r18 = RunNode(n, 18, {x, Tensor::FromVector<float>({2}, {2, 3}), Tensor::FromVector<float>({2}, {1, 0})},
                     Backend::kReference);
  ASSERT_TRUE(r18.ok()) << r18.status().message();
  EXPECT_EQ(Values((*r18)[0]), (std::vector<float>{-1, 3, -3, 3}));
  // Opset 18 takes [num_groups] scale/bias, opset 21 [C]: each rejects the other's.
  auto bad = RunNode(n, 18, {x, Tensor::FromVector<float>({4}, {1, 2, 3, 4}), Tensor::FromVector<float>({4}, {0, 0, 0, 1})},
                     Backend::kReference);
  EXPECT_FALSE(bad.ok());
  bad = RunNode(n, 21, {x, Tensor::FromVector<float>({2}, {2, 3}), Tensor::FromVector<float>({2}, {1, 0})},
                Backend::kReference);
  EXPECT_FALSE(bad.ok());
}

TEST(GroupNormReference, MatchesNumpy) {
  const Tensor x = Tensor::FromVector<float>({2, 4, 3}, kNormX);
  auto r21 = RunNode(MakeNode("GroupNormalization", 3, 1,
                              Attrs({{"num_groups", Attribute::Int(2)}, {"epsilon", Attribute::Float(1e-2f)}})),
                     21, {x, Tensor::FromVector<float>({4}, {0.5f, -1, 2, 1.5f}), Tensor::FromVector<float>({4}, {0, 1, -1, 0.25f})},
                     Backend::kReference);
  ASSERT_TRUE(r21.ok()) << r21.status().message();
  ExpectNear((*r21)[0], {-0.63416922f, -0.36630315f, 0.1234704f, -0.51540619f, 1.7326063f, 0.028795907f,
                         -3.4388335f, 0.6245091f, -2.4499393f, 2.6478589f, 0.75301176f, -0.9526729f,
                         0.80136484f, 0.42012531f, 0.085631125f, 1.4076355f, 1.8995025f, 2.3071046f,
                         2.7707729f, 0.21152627f, -1.5446931f, -0.88867104f, -1.0459496f, -0.64358401f},
             1e-5f);
  auto r18 = RunNode(MakeNode("GroupNormalization", 3, 1, Attrs({{"num_groups", Attribute::Int(2)}})), 18,
                     {x, Tensor::FromVector<float>({2}, {0.5f, -2}), Tensor::FromVector<float>({2}, {1, -1})},
                     Backend::kReference);
  ASSERT_TRUE(r18.ok()) << r18.status().message();
  ExpectNear((*r18)[0], {0.36491966f, 0.6331706f, 1.1236478f, 1.7587917f, 0.6331706f, 1.4862998f,
                         1.4422805f, -2.6268053f, 0.45198864f, -4.201664f, -1.6716303f, 0.60583037f,
                         1.8021741f, 1.4205496f, 1.0857176f, 0.79597646f, 0.54979455f, 0.34578773f,
                         -4.8776851f, -2.2458766f, -0.43986332f, 0.56127411f, 0.77692449f, 0.22522616f},
             1e-5f);
  // One group per channel is InstanceNormalization.
  const std::vector<Tensor> in = {x, Tensor::FromVector<float>({4}, {0.5f, -1, 2, 1.5f}),
                                  Tensor::FromVector<float>({4}, {0, 1, -1, 0.25f})};
  auto g = RunNode(MakeNode("GroupNormalization", 3, 1, Attrs({{"num_groups", Attribute::Int(4)}})), 21, in,
                   Backend::kReference);
  auto i = RunNode(MakeNode("InstanceNormalization", 3, 1), 17, in, Backend::kReference);
  ASSERT_TRUE(g.ok() && i.ok());
  EXPECT_TRUE(::whittle::testing::TensorsClose((*g)[0], (*i)[0], 1e-6f, 1e-6f));
}

TEST(ChannelNorm, BackendsAgreeAndDoubleWorks) {
  const std::vector<Tensor> in = {RandomFloat({2, 6, 5, 4}, 1), RandomFloat({6}, 2), RandomFloat({6}, 3)};
  ExpectBackendsMatchReference(MakeNode("InstanceNormalization", 3, 1), in);
  ExpectBackendsMatchReference(MakeNode("GroupNormalization", 3, 1, Attrs({{"num_groups", Attribute::Int(3)}})), in,
                               1e-5f, 1e-5f, 21);
  Tensor x(DType::kFloat64, {1, 2, 2}), sc(DType::kFloat64, {2}), b(DType::kFloat64, {2});
  const double xv[] = {1, 3, 0, 4};
  for (int k = 0; k < 4; ++k) x.data<double>()[k] = xv[k];
  sc.data<double>()[0] = sc.data<double>()[1] = 1;
  b.data<double>()[0] = b.data<double>()[1] = 0;
  auto r = RunNode(MakeNode("InstanceNormalization", 3, 1, Attrs({{"epsilon", Attribute::Float(0.f)}})), 17,
                   {x, sc, b}, Backend::kCpu);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const double* y = (*r)[0].data<double>();
  EXPECT_EQ(std::vector<double>(y, y + 4), (std::vector<double>{-1, 1, -1, 1}));
}

TEST(ChannelNorm, RejectsBadAttributesAndShapes) {
  const std::vector<Tensor> in = {RandomFloat({1, 4, 3}, 1), RandomFloat({4}, 2), RandomFloat({4}, 3)};
  auto expect_error = [](const Node& n, int opset, const std::vector<Tensor>& inputs, const std::string& needle) {
    auto r = RunNode(n, opset, inputs, Backend::kCpu);
    ASSERT_FALSE(r.ok()) << needle;
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  };
  expect_error(MakeNode("GroupNormalization", 3, 1), 21, in, "num_groups");
  expect_error(MakeNode("GroupNormalization", 3, 1, Attrs({{"num_groups", Attribute::Int(0)}})), 21, in, "num_groups");
  expect_error(MakeNode("GroupNormalization", 3, 1, Attrs({{"num_groups", Attribute::Int(3)}})), 21, in,
               "does not divide");
  expect_error(MakeNode("GroupNormalization", 3, 1,
                        Attrs({{"num_groups", Attribute::Int(2)}, {"stash_type", Attribute::Int(10)}})),
               21, in, "stash_type");
  expect_error(MakeNode("GroupNormalization", 3, 1,
                        Attrs({{"num_groups", Attribute::Int(2)}, {"stash_type", Attribute::Int(1)}})),
               18, {in[0], RandomFloat({2}, 2), RandomFloat({2}, 3)}, "stash_type");
  expect_error(MakeNode("InstanceNormalization", 3, 1), 17, {in[0], RandomFloat({3}, 2), in[2]}, "4 values");
  expect_error(MakeNode("InstanceNormalization", 3, 1), 17, {RandomFloat({4}, 1), in[1], in[2]}, "rank");
  // stash_type 11 (double) is accepted.
  auto ok = RunNode(MakeNode("GroupNormalization", 3, 1,
                             Attrs({{"num_groups", Attribute::Int(2)}, {"stash_type", Attribute::Int(11)}})),
                    21, in, Backend::kCpu);
  EXPECT_TRUE(ok.ok()) << ok.status().message();
}

}  // namespace
}  // namespace whittle
