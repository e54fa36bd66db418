// BatchNormalization in training mode: hand-computed statistics and outputs for each opset's way
// of asking for training (training_mode=1 from 14, outputs past Y in 7-13, is_test=0 in 6), the
// CPU kernel against the reference on odd shapes (bit-identical across thread counts), and the
// refusals (inference with statistics outputs, empty batch, wrong parameter length).
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
using ::whittle::testing::TensorsClose;

AttributeMap Attrs(std::vector<std::pair<std::string, Attribute>> kv) {
  AttributeMap m;
  for (auto& [k, v] : kv) m.Set(k, v);
  return m;
}

Node Train(int outputs, std::vector<std::pair<std::string, Attribute>> extra = {}) {
  extra.emplace_back("training_mode", Attribute::Int(1));
  return MakeNode("BatchNormalization", 5, outputs, Attrs(std::move(extra)));
}

std::vector<Tensor> BnInputs(const Dims& x, int64_t c, uint32_t seed) {
  return {RandomFloat(x, seed, -3.f, 5.f), RandomFloat({c}, seed + 1), RandomFloat({c}, seed + 2),
          RandomFloat({c}, seed + 3), RandomFloat({c}, seed + 4, 0.1f, 2.f)};
}

// X [2, 2, 2]: channel 0 holds {1, 3, 5, 7} (mean 4, biased var 5), channel 1 {2, 2, 2, 2} (mean 2, var 0).
std::vector<Tensor> HandInputs() {
  return {Tensor::FromVector<float>({2, 2, 2}, {1, 3, 2, 2, 5, 7, 2, 2}), Tensor::FromVector<float>({2}, {1, 2}),
          Tensor::FromVector<float>({2}, {0, 1}), Tensor::FromVector<float>({2}, {0, 10}),
          Tensor::FromVector<float>({2}, {1, 3})};
}

std::vector<float> HandY(float eps) {
  const float a = 1.f / std::sqrt(5.f + eps);
  return {-3 * a, -1 * a, 1, 1, 1 * a, 3 * a, 1, 1};  // channel 1: (2 - 2) * 2 / sqrt(eps) + 1 = 1
}

void ExpectValues(const Tensor& t, const std::vector<float>& want, float tol = 1e-5f) {
  ASSERT_EQ(t.numel(), static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(t.data<float>()[i], want[i], tol) << "element " << i;
}

TEST(BatchNormTraining, HandComputedOpset15) {
  const float eps = 1e-2f;
  for (Backend b : ::whittle::testing::TestedBackends()) {
    for (bool konst : {false, true}) {
      SCOPED_TRACE(std::string(BackendName(b)) + (konst ? " const" : ""));
      auto r = RunNode(Train(3, {{"epsilon", Attribute::Float(eps)}, {"momentum", Attribute::Float(0.75f)}}), 15,
                       HandInputs(), b, 1, konst);
      ASSERT_TRUE(r.ok()) << r.status().message();
      ExpectValues((*r)[0], HandY(eps));
      ExpectValues((*r)[1], {0 * 0.75f + 4 * 0.25f, 10 * 0.75f + 2 * 0.25f});  // running_mean
      ExpectValues((*r)[2], {1 * 0.75f + 5 * 0.25f, 3 * 0.75f + 0 * 0.25f});   // running_var (biased)
      // Y alone in training mode still normalises with the batch statistics.
      auto y = RunNode(Train(1, {{"epsilon", Attribute::Float(eps)}}), 15, HandInputs(), b, 1, konst);
      ASSERT_TRUE(y.ok()) << y.status().message();
      ExpectValues((*y)[0], HandY(eps));
    }
  }
}

TEST(BatchNormTraining, OldOpsetsTrainWhenStatisticsAreAsked) {
  const float eps = 1e-2f;
  for (Backend b : ::whittle::testing::TestedBackends()) {
    SCOPED_TRACE(BackendName(b));
    const Node five = MakeNode("BatchNormalization", 5, 5, Attrs({{"epsilon", Attribute::Float(eps)}}));
    for (int opset : {7, 9, 13}) {
      auto r = RunNode(five, opset, HandInputs(), b);
      ASSERT_TRUE(r.ok()) << r.status().message();
      ExpectValues((*r)[0], HandY(eps));
      ExpectValues((*r)[1], {0.4f, 9.2f});  // default momentum 0.9
      ExpectValues((*r)[2], {1.4f, 2.7f});
      ExpectValues((*r)[3], {4, 2});  // saved_mean: batch mean
      ExpectValues((*r)[4], {5, 0});  // saved_var: biased batch variance
    }
    // Only Y: inference with the given statistics (channel 1: (2 - 10) * 2 / sqrt(3 + eps) + 1).
    auto inf = RunNode(MakeNode("BatchNormalization", 5, 1, Attrs({{"epsilon", Attribute::Float(eps)}})), 9,
                       HandInputs(), b);
    ASSERT_TRUE(inf.ok()) << inf.status().message();
    EXPECT_NEAR(inf->at(0).data<float>()[2], -16.f / std::sqrt(3.f + eps) + 1.f, 1e-5f);
    // Opset 6: is_test=0 (the default) is training.
    auto six = RunNode(MakeNode("BatchNormalization", 5, 1, Attrs({{"epsilon", Attribute::Float(eps)}})), 6,
                       HandInputs(), b);
    ASSERT_TRUE(six.ok()) << six.status().message();
    ExpectValues((*six)[0], HandY(eps));
  }
}

TEST(BatchNormTraining, SpatialZeroStatisticsPerElement) {
  // opset 7, spatial=0: statistics over N only, one per element of X.shape[1:] (reference kernel).
  const Tensor x = Tensor::FromVector<float>({2, 1, 2}, {1, 4, 3, 8});
  const Tensor one = Tensor::FromVector<float>({1, 2}, {1, 1}), zero = Tensor::FromVector<float>({1, 2}, {0, 0});
  const Node n = MakeNode("BatchNormalization", 5, 5, Attrs({{"spatial", Attribute::Int(0)}, {"epsilon", Attribute::Float(0.f)}}));
  for (Backend b : ::whittle::testing::TestedBackends()) {
    auto r = RunNode(n, 7, {x, one, zero, zero, one}, b);
    ASSERT_TRUE(r.ok()) << r.status().message();
    ExpectValues((*r)[0], {-1, -1, 1, 1});
    ExpectValues((*r)[3], {2, 6});
    ExpectValues((*r)[4], {1, 4});
    EXPECT_EQ((*r)[4].dims(), (Dims{1, 2}));
  }
}

TEST(BatchNormTraining, DoubleRunsOnTheReference) {
  std::vector<Tensor> in;
  in.push_back(Tensor::FromVector<double>({2, 1}, {1, 3}));
  for (double v : {1.0, 0.0, 0.0, 1.0}) in.push_back(Tensor::FromVector<double>({1}, {v}));
  auto r = RunNode(Train(3, {{"epsilon", Attribute::Float(0.f)}}), 15, in, Backend::kCpu);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_DOUBLE_EQ((*r)[0].data<double>()[0], -1.0);
  EXPECT_DOUBLE_EQ((*r)[0].data<double>()[1], 1.0);
  // momentum is a float attribute: 0.9f, not 0.9.
  const double m = static_cast<double>(0.9f);
  EXPECT_DOUBLE_EQ((*r)[1].data<double>()[0], 2 * (1 - m));  // 0 * m + 2 * (1 - m)
  EXPECT_DOUBLE_EQ((*r)[2].data<double>()[0], m + (1 - m));  // 1 * m + 1 * (1 - m)
}

TEST(BatchNormTraining, CpuMatchesReference) {
  // N=1, C=1, spatial 1, rank 2, and planes longer than the CPU kernel's statistics chunk.
  const std::vector<Dims> shapes = {{1, 1},       {4, 1},      {1, 3, 1, 1}, {1, 1, 7},     {2, 5, 7},
                                    {2, 3, 9, 8}, {3, 2, 40000}, {1, 1, 70001}, {16, 8, 14, 14}, {1, 2, 3, 4, 5}};
  uint32_t seed = 1;
  for (const Dims& d : shapes) {
    SCOPED_TRACE(DimsToString(d));
    const auto in = BnInputs(d, d[1], seed);
    seed += 10;
    const Node n = Train(3, {{"epsilon", Attribute::Float(1e-3f)}, {"momentum", Attribute::Float(0.8f)}});
    ExpectBackendsMatchReference(n, in, 1e-4f, 1e-4f, 15);
    ExpectBackendsMatchReference(n, in, 1e-4f, 1e-4f, 15, 2, /*inputs_const=*/true);
    ExpectBackendsMatchReference(MakeNode("BatchNormalization", 5, 5), in, 1e-4f, 1e-4f, 9, 3);
    // The result does not depend on the thread count.
    auto one = RunNode(n, 15, in, Backend::kCpu, 1);
    auto three = RunNode(n, 15, in, Backend::kCpu, 3);
    ASSERT_TRUE(one.ok() && three.ok());
    for (size_t i = 0; i < 3; ++i) EXPECT_TRUE((*one)[i].BitwiseEquals((*three)[i])) << "output " << i;
  }
}

TEST(BatchNormTraining, Refusals) {
  for (Backend b : ::whittle::testing::TestedBackends()) {
    SCOPED_TRACE(BackendName(b));
    // Statistics outputs without training_mode=1.
    auto r = RunNode(MakeNode("BatchNormalization", 5, 3), 15, HandInputs(), b);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().message();
    // An empty batch has no statistics.
    std::vector<Tensor> empty = HandInputs();
    empty[0] = Tensor(DType::kFloat32, {0, 2, 2});
    r = RunNode(Train(3), 15, empty, b);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("non-empty batch"), std::string::npos) << r.status().message();
    // Wrong scale length.
    std::vector<Tensor> bad = HandInputs();
    bad[1] = Tensor::FromVector<float>({3}, {1, 1, 1});
    r = RunNode(Train(3), 15, bad, b);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("C=2"), std::string::npos) << r.status().message();
    // training_mode is not an attribute before opset 14.
    r = RunNode(Train(1), 9, HandInputs(), b);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("opset 14"), std::string::npos) << r.status().message();
  }
}

}  // namespace
}  // namespace whittle
