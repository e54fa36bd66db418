// --int8 arithmetic: weight quantization error bounds, activation parameters, int32 biases, and
// the calibration thresholds on distributions whose answer we know (a Gaussian with a few huge
// outliers: min/max must take the outlier, percentile/mse/entropy must ignore it).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "passes/quantize/calibration.h"
#include "passes/quantize/quant_math.h"
#include "tests/util/test_util.h"

namespace whittle::quant {
namespace {

TEST(Int8Math, PerChannelWeightsRoundTripWithinHalfAStep) {
  // Channels of very different magnitude: per-channel scales must follow each one.
  Tensor w = testing::RandomFloat({6, 3, 3, 3}, 5);
  float* p = w.data<float>();
  for (int64_t c = 0; c < 6; ++c)
    for (int64_t k = 0; k < 27; ++k) p[c * 27 + k] *= std::pow(10.f, static_cast<float>(c) - 3.f);
  QuantizedWeight q = QuantizeWeightSymmetric(w, 0);
  ASSERT_EQ(q.scales.size(), 6u);
  for (int64_t c = 0; c < 6; ++c) {
    float amax = 0;
    for (int64_t k = 0; k < 27; ++k) amax = std::max(amax, std::fabs(p[c * 27 + k]));
    EXPECT_FLOAT_EQ(q.scales[static_cast<size_t>(c)], amax / 127.f);
    for (int64_t k = 0; k < 27; ++k) {
      const int8_t v = q.values.data<int8_t>()[c * 27 + k];
      EXPECT_GE(v, -127);
      const float back = static_cast<float>(v) * q.scales[static_cast<size_t>(c)];
      EXPECT_LE(std::fabs(back - p[c * 27 + k]), q.scales[static_cast<size_t>(c)] / 2 * (1 + 1e-5f)) << c << " " << k;
    }
  }
  // Per-tensor: one scale, and the small channels lose their precision (which is why per-channel is the default).
  QuantizedWeight t = QuantizeWeightSymmetric(w, -1);
  ASSERT_EQ(t.scales.size(), 1u);
  int zeros = 0;
  for (int64_t k = 0; k < 27; ++k) zeros += t.values.data<int8_t>()[k] == 0;
  EXPECT_EQ(zeros, 27);
}

TEST(Int8Math, MatMulWeightsPerColumn) {
  // [K, N] with axis 1: column n's scale is max over rows of |w[:, n]| / 127.
  Tensor w = Tensor::FromVector<float>({2, 3}, {1.f, -4.f, 0.f, -2.f, 1.f, 0.f});
  QuantizedWeight q = QuantizeWeightSymmetric(w, 1);
  ASSERT_EQ(q.scales.size(), 3u);
  EXPECT_FLOAT_EQ(q.scales[0], 2.f / 127.f);
  EXPECT_FLOAT_EQ(q.scales[1], 4.f / 127.f);
  EXPECT_FLOAT_EQ(q.scales[2], 1.f);  // all-zero column: a valid scale, values 0
  EXPECT_EQ(q.values.data<int8_t>()[3], -127);
  EXPECT_EQ(q.values.data<int8_t>()[1], -127);
  Tensor t = Transpose2D(q.values);
  EXPECT_EQ(t.dims(), (Dims{3, 2}));
  EXPECT_EQ(t.data<int8_t>()[1], q.values.data<int8_t>()[3]);
}

TEST(Int8Math, UnsignedActivationRangeAlwaysContainsZero) {
  for (auto [lo, hi] : std::vector<std::pair<float, float>>{{0.5f, 3.f}, {-2.f, -0.5f}, {-1.f, 3.f}, {0.f, 6.f}}) {
    ActParams p = ChooseActParams(lo, hi, DType::kUInt8);
    EXPECT_GT(p.scale, 0.f);
    EXPECT_GE(p.zero_point, 0);
    EXPECT_LE(p.zero_point, 255);
    // 0 is exact, and both ends are representable within half a step.
    EXPECT_EQ(DequantizeValue(QuantizeValue(0.f, p), p), 0.f) << lo << " " << hi;
    EXPECT_LE(std::fabs(DequantizeValue(QuantizeValue(lo, p), p) - lo), p.scale * 0.51f) << lo << " " << hi;
    EXPECT_LE(std::fabs(DequantizeValue(QuantizeValue(hi, p), p) - hi), p.scale * 0.51f) << lo << " " << hi;
  }
  ActParams relu = ChooseActParams(0.f, 6.f, DType::kUInt8);
  EXPECT_EQ(relu.zero_point, 0);
  ActParams s8 = ChooseActParams(-1.f, 3.f, DType::kInt8);
  EXPECT_EQ(s8.zero_point, 0);
  EXPECT_FLOAT_EQ(s8.scale, 3.f / 127.f);
  ActParams flat = ChooseActParams(0.f, 0.f, DType::kUInt8);
  EXPECT_EQ(flat.scale, 1.f);
  // Saturation and round-half-to-even, as QuantizeLinear defines them.
  ActParams unit;
  unit.scale = 1.f;
  EXPECT_EQ(QuantizeValue(1000.f, unit), 255);
  EXPECT_EQ(QuantizeValue(-3.f, unit), 0);
  EXPECT_EQ(QuantizeValue(2.5f, unit), 2);
  EXPECT_EQ(QuantizeValue(3.5f, unit), 4);
}

TEST(Int8Math, BiasAtInputTimesWeightScale) {
  Tensor b = Tensor::FromVector<float>({3}, {0.5f, -1.f, 1e9f});
  const std::vector<float> ws = {0.01f, 0.02f, 1e-3f};
  Tensor q = QuantizeBias(b, 0.1f, ws);
  ASSERT_EQ(q.dtype(), DType::kInt32);
  EXPECT_EQ(q.data<int32_t>()[0], 500);  // 0.5 / (0.1*0.01)
  EXPECT_EQ(q.data<int32_t>()[1], -500);
  EXPECT_EQ(q.data<int32_t>()[2], 2147483647);  // saturated
}

// |x| of 10^7 N(0,1) samples as exact expected bin counts (deterministic), plus 5 outliers at 20.
std::vector<double> GaussianWithOutliers(double* limit) {
  *limit = 20;
  const int bins = 2048;
  std::vector<double> h(bins, 0.0);
  const double w = *limit / bins;
  for (int i = 0; i < bins; ++i)  // P(i*w <= |x| < (i+1)*w) = erf((i+1)w/sqrt2) - erf(iw/sqrt2)
    h[static_cast<size_t>(i)] = 1e7 * (std::erf((i + 1) * w / std::sqrt(2.0)) - std::erf(i * w / std::sqrt(2.0)));
  h[bins - 1] += 5;
  return h;
}

TEST(Int8Calibration, OutliersDecideMinMaxButNotTheOthers) {
  double limit = 0;
  const std::vector<double> h = GaussianWithOutliers(&limit);
  EXPECT_DOUBLE_EQ(ChooseThreshold(h, limit, CalibMethod::kMinMax, 0, 255), 20.0);
  const double pct = ChooseThreshold(h, limit, CalibMethod::kPercentile, 99.99, 255);
  const double mse = ChooseThreshold(h, limit, CalibMethod::kMse, 0, 255);
  const double kl = ChooseThreshold(h, limit, CalibMethod::kEntropy, 0, 127);
  // |N(0,1)|'s 99.99th percentile is 3.89; bins are 0.01 wide.
  EXPECT_NEAR(pct, 3.89, 0.02);
  // Clipping 5 values by ~15 costs less than the rounding noise a range of 20 puts on 10^7
  // values, so mse clips; the Gaussian itself still needs a range of a few sigma.
  EXPECT_GT(mse, 2.5);
  EXPECT_LT(mse, 6.0);
  EXPECT_GT(kl, 2.0);
  EXPECT_LT(kl, 8.0);
  std::printf("[ int8 ] thresholds: minmax 20, percentile:99.99 %.3g, mse %.3g, entropy %.3g\n", pct, mse, kl);
}

TEST(Int8Calibration, MseKeepsRareFarOutliersWhenClippingThemCostsMore) {
  // The MSE objective at work: 5 values at 1000 among 10^5 cost 5 * 1000^2 if clipped, far more
  // than the rounding noise of a range of 1000 on 10^5 values, so the range keeps them.
  std::vector<double> h(2048, 0.0);
  h[0] = 1e5;
  h[2047] = 5;
  EXPECT_GT(ChooseThreshold(h, 1000.0, CalibMethod::kMse, 0, 255), 900.0);
}

TEST(Int8Calibration, MseAndEntropyKeepTheRangeOfAUniformDistribution) {
  // Nothing to clip: uniform values fill the histogram, so every method keeps (nearly) all of it.
  std::vector<double> h(2048, 50.0);
  EXPECT_GT(ChooseThreshold(h, 1.0, CalibMethod::kMse, 0, 255), 0.9);
  EXPECT_GT(ChooseThreshold(h, 1.0, CalibMethod::kEntropy, 0, 255), 0.9);
  EXPECT_NEAR(ChooseThreshold(h, 1.0, CalibMethod::kPercentile, 99.0, 255), 0.99, 0.002);
}

}  // namespace
}  // namespace whittle::quant
