// BatchNormalization and LayerNormalization kernels: hand-computed values, CPU against the
// reference, and the inference-only restrictions.
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
  for (Backend p : BuiltBackends()) {
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

TEST(BatchNorm, TrainingIsUnimplemented) {
  const auto in = BnInputs({2, 3, 4, 5}, 3, 1);
  auto r = RunNode(MakeNode("BatchNormalization", 5, 1, Attrs({{"training_mode", Attribute::Int(1)}})), 15, in,
                   Backend::kCpu);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
  r = RunNode(MakeNode("BatchNormalization", 5, 3), 15, in, Backend::kCpu);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
  // Opset 6 with is_test=1 is inference and runs.
  r = RunNode(MakeNode("BatchNormalization", 5, 1, Attrs({{"is_test", Attribute::Int(1)}})), 6, in, Backend::kCpu);
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
  for (Backend p : BuiltBackends()) {
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
               {{8, 16, 64}, 2, {1, 64}, true, 1},  {{4, 6}, 1, {1}, true, 3}};
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

}  // namespace
}  // namespace whittle
