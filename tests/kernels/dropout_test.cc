// Dropout in training mode: the mask stream is numpy's RandomState(seed).uniform (checked against
// std::mt19937's published first outputs and values from numpy), Y = X * mask / (1 - ratio)
// exactly, the kept fraction is near 1 - ratio on a large tensor, ratio 0 or training_mode false
// is the identity, a seed attribute makes every call draw the same mask while no seed draws a new
// one per call, the CPU kernel is bit-exact with the reference, and bad ratios are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/common/dropout.h"
#include "kernels/common/dtype_dispatch.h"
#include "tests/util/test_util.h"

namespace whittle {
namespace {

using ::whittle::testing::MakeNode;
using ::whittle::testing::RandomFloat;
using ::whittle::testing::TensorsClose;

Node DropoutNode(int outputs, bool seeded = true, int64_t seed = 0) {
  AttributeMap a;
  if (seeded) a.Set("seed", Attribute::Int(seed));
  return MakeNode("Dropout", 3, outputs, a);
}

std::vector<Tensor> Inputs(const Tensor& x, float ratio, bool training = true) {
  return {x, Tensor::Scalar<float>(ratio), Tensor::Scalar<bool>(training)};
}

StatusOr<std::vector<Tensor>> RunDropout(const Node& n, const std::vector<Tensor>& in, Backend b, bool konst = false) {
  return RunNode(n, 13, in, b, 2, konst);
}

int64_t CountKept(const Tensor& mask) {
  int64_t k = 0;
  for (int64_t i = 0; i < mask.numel(); ++i) k += mask.data<bool>()[i];
  return k;
}

TEST(DropoutTraining, StreamIsNumpyLegacyUniform) {
  // np.random.RandomState(0): MT19937 init_genrand(0); its first raw words.
  std::mt19937 rng(0);
  EXPECT_EQ(rng(), 2357136044u);
  EXPECT_EQ(rng(), 2546248239u);
  // np.random.RandomState(0).uniform(0, 1, 4) >= 0.5 is [True, True, True, True]; at 0.75 the
  // first four are [False, False, False, False] (the ONNX test_training_dropout*_mask data).
  const Tensor x = Tensor::FromVector<float>({4}, {1, 2, 3, 4});
  for (Backend b : ::whittle::testing::TestedBackends()) {
    auto half = RunDropout(DropoutNode(2), Inputs(x, 0.5f), b);
    ASSERT_TRUE(half.ok()) << half.status().message();
    EXPECT_TRUE(TensorsClose((*half)[1], Tensor::FromVector<bool>({4}, {true, true, true, true})));
    EXPECT_TRUE(TensorsClose((*half)[0], Tensor::FromVector<float>({4}, {2, 4, 6, 8})));
    auto most = RunDropout(DropoutNode(2), Inputs(x, 0.75f), b);
    ASSERT_TRUE(most.ok()) << most.status().message();
    EXPECT_EQ(CountKept((*most)[1]), 0);
  }
  // The threshold compares exactly: U >= ratio <=> k >= ceil(ratio * 2^53).
  EXPECT_EQ(DropoutKeepThreshold(0.5), uint64_t{1} << 52);
  EXPECT_EQ(DropoutKeepThreshold(0.0), 0u);
}

TEST(DropoutTraining, StructureAndStatistics) {
  const Tensor x = RandomFloat({257, 1031}, 3, -2.f, 2.f);  // not a multiple of the 312-element block
  for (float ratio : {0.1f, 0.5f, 0.9f}) {
    for (Backend b : ::whittle::testing::TestedBackends()) {
      SCOPED_TRACE(std::string(BackendName(b)) + " ratio " + std::to_string(ratio));
      auto r = RunDropout(DropoutNode(2, true, 1234), Inputs(x, ratio), b);
      ASSERT_TRUE(r.ok()) << r.status().message();
      const Tensor& y = (*r)[0];
      const Tensor& m = (*r)[1];
      EXPECT_EQ(m.dtype(), DType::kBool);
      const float scale = static_cast<float>(1.0 / (1.0 - static_cast<double>(ratio)));
      for (int64_t i = 0; i < x.numel(); ++i) {
        const float want = (x.data<float>()[i] * (m.data<bool>()[i] ? 1.f : 0.f)) * scale;
        ASSERT_EQ(y.data<float>()[i], want) << "element " << i;
      }
      // 265k Bernoulli draws: the kept fraction is within 5 standard deviations of 1 - ratio.
      const double n = static_cast<double>(x.numel());
      const double kept = static_cast<double>(CountKept(m)) / n;
      const double sd = std::sqrt(ratio * (1.0 - ratio) / n);
      EXPECT_NEAR(kept, 1.0 - ratio, 5 * sd);
    }
  }
}

TEST(DropoutTraining, CpuIsBitExactWithReference) {
  for (const Dims& d : std::vector<Dims>{{1}, {311}, {312}, {313}, {3, 4, 5}, {1000, 77}}) {
    SCOPED_TRACE(DimsToString(d));
    const Tensor x = RandomFloat(d, 9);
    for (bool konst : {false, true}) {
      auto ref = RunDropout(DropoutNode(2, true, 42), Inputs(x, 0.3f), Backend::kReference, konst);
      ASSERT_TRUE(ref.ok()) << ref.status().message();
      for (Backend b : ::whittle::testing::TestedBackends()) {
        auto got = RunDropout(DropoutNode(2, true, 42), Inputs(x, 0.3f), b, konst);
        ASSERT_TRUE(got.ok()) << got.status().message();
        EXPECT_TRUE((*got)[0].BitwiseEquals((*ref)[0])) << BackendName(b);
        EXPECT_TRUE((*got)[1].BitwiseEquals((*ref)[1])) << BackendName(b);
        // Without the mask output, Y is the same.
        auto y = RunDropout(DropoutNode(1, true, 42), Inputs(x, 0.3f), b, konst);
        ASSERT_TRUE(y.ok()) << y.status().message();
        EXPECT_TRUE((*y)[0].BitwiseEquals((*ref)[0])) << BackendName(b);
      }
    }
  }
}

TEST(DropoutTraining, IdentityCases) {
  const Tensor x = RandomFloat({5, 7}, 4);
  const Tensor all_true = [] {
    Tensor t(DType::kBool, {5, 7});
    for (int64_t i = 0; i < t.numel(); ++i) t.data<bool>()[i] = true;
    return t;
  }();
  for (Backend b : ::whittle::testing::TestedBackends()) {
    for (bool konst : {false, true}) {
      SCOPED_TRACE(std::string(BackendName(b)) + (konst ? " const" : ""));
      for (const auto& in : {Inputs(x, 0.f, true), Inputs(x, 0.5f, false)}) {
        auto r = RunDropout(DropoutNode(2), in, b, konst);
        ASSERT_TRUE(r.ok()) << r.status().message();
        EXPECT_TRUE(r->at(0).BitwiseEquals(x));
        EXPECT_TRUE(r->at(1).BitwiseEquals(all_true));
      }
      // No training_mode input: inference.
      auto r = RunNode(MakeNode("Dropout", 2, 1), 13, {x, Tensor::Scalar<float>(0.5f)}, b, 2, konst);
      ASSERT_TRUE(r.ok()) << r.status().message();
      EXPECT_TRUE(r->at(0).BitwiseEquals(x));
    }
  }
}

TEST(DropoutTraining, SeedMakesCallsRepeatableAndNoSeedDoesNot) {
  const Tensor x = RandomFloat({64, 64}, 5);
  for (Backend b : ::whittle::testing::TestedBackends()) {
    SCOPED_TRACE(BackendName(b));
    auto a = RunDropout(DropoutNode(2, true, 7), Inputs(x, 0.5f), b);
    auto a2 = RunDropout(DropoutNode(2, true, 7), Inputs(x, 0.5f), b);
    auto other = RunDropout(DropoutNode(2, true, 8), Inputs(x, 0.5f), b);
    ASSERT_TRUE(a.ok() && a2.ok() && other.ok());
    EXPECT_TRUE((*a)[1].BitwiseEquals((*a2)[1]));
    EXPECT_FALSE((*a)[1].BitwiseEquals((*other)[1]));
    auto u1 = RunDropout(DropoutNode(2, false), Inputs(x, 0.5f), b);
    auto u2 = RunDropout(DropoutNode(2, false), Inputs(x, 0.5f), b);
    ASSERT_TRUE(u1.ok() && u2.ok());
    EXPECT_FALSE((*u1)[1].BitwiseEquals((*u2)[1]));  // 4096 fair coins agreeing: 2^-4096
  }
}

TEST(DropoutTraining, OtherFloatTypes) {
  // double runs on the reference with the same mask as float32.
  const Tensor xf = RandomFloat({100}, 6);
  Tensor xd(DType::kFloat64, {100});
  for (int64_t i = 0; i < 100; ++i) xd.data<double>()[i] = xf.data<float>()[i];
  for (Backend b : ::whittle::testing::TestedBackends()) {
    auto f = RunDropout(DropoutNode(2, true, 3), Inputs(xf, 0.25f), b);
    auto d = RunDropout(DropoutNode(2, true, 3), Inputs(xd, 0.25f), b);
    ASSERT_TRUE(f.ok() && d.ok()) << (f.ok() ? d.status().message() : f.status().message());
    EXPECT_TRUE((*f)[1].BitwiseEquals((*d)[1]));
    for (int64_t i = 0; i < 100; ++i)
      EXPECT_NEAR((*d)[0].data<double>()[i], (*f)[0].data<float>()[i], 1e-6) << i;
  }
}

TEST(DropoutTraining, Float16UsesTheSameMask) {
  const Tensor xf = RandomFloat({50}, 8);
  Tensor xh(DType::kFloat16, {50});
  for (int64_t i = 0; i < 50; ++i)
    static_cast<uint16_t*>(xh.raw_data())[i] = ew::DoubleToHalf(xf.data<float>()[i]);
  for (Backend b : ::whittle::testing::TestedBackends()) {
    auto f = RunDropout(DropoutNode(2, true, 11), Inputs(xf, 0.5f), b);
    auto h = RunDropout(DropoutNode(2, true, 11), Inputs(xh, 0.5f), b);
    ASSERT_TRUE(f.ok() && h.ok()) << (f.ok() ? h.status().message() : f.status().message());
    EXPECT_TRUE((*f)[1].BitwiseEquals((*h)[1]));
    for (int64_t i = 0; i < 50; ++i)
      EXPECT_NEAR(ew::HalfToFloat(static_cast<const uint16_t*>((*h)[0].raw_data())[i]), (*f)[0].data<float>()[i], 4e-3)
          << i;
  }
}

TEST(DropoutTraining, Refusals) {
  const Tensor x = RandomFloat({4}, 7);
  for (Backend b : ::whittle::testing::TestedBackends()) {
    for (float bad : {1.f, -0.1f, NAN}) {
      auto r = RunDropout(DropoutNode(1), Inputs(x, bad), b);
      ASSERT_FALSE(r.ok());
      EXPECT_NE(r.status().message().find("ratio"), std::string::npos) << r.status().message();
    }
    auto r = RunDropout(DropoutNode(1), {x, Tensor::Scalar<float>(0.5f), Tensor::Scalar<float>(1.f)}, b);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("training_mode"), std::string::npos) << r.status().message();
    // No training mode before opset 12 (ratio was an attribute, no training_mode input).
    r = RunNode(MakeNode("Dropout", 3, 1), 10, Inputs(x, 0.5f), b);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("opset 12"), std::string::npos) << r.status().message();
  }
}

}  // namespace
}  // namespace whittle
