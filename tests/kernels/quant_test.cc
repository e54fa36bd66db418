// QuantizeLinear / DequantizeLinear kernels: hand-computed values (the ONNX examples, rounding
// half to even, saturation, per-axis), and the vectorized CPU kernels bit-identical to the
// reference on large tensors full of rounding ties.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "lib/ir/domain.h"
#include "tests/util/test_util.h"

namespace whittle {
namespace {

using ::whittle::testing::ExpectBackendsMatchReference;
using ::whittle::testing::MakeNode;
using ::whittle::testing::RandomFloat;
using ::whittle::testing::RandomInt8;
using ::whittle::testing::RandomUInt8;
using ::whittle::testing::TensorsClose;

AttributeMap Axis(int64_t a) {
  AttributeMap m;
  m.Set("axis", Attribute::Int(a));
  return m;
}

Tensor F(const Dims& dims, std::vector<float> v) { return Tensor::FromVector<float>(dims, v); }

std::vector<Tensor> Both(const Node& n, const std::vector<Tensor>& in, int opset = 13) {
  return ExpectBackendsMatchReference(n, in, 0.f, 0.f, opset);
}

TEST(QuantKernelsTest, QuantizeOnnxExample) {
  auto y = Both(MakeNode("QuantizeLinear", 3, 1),
                {F({6}, {0, 2, 3, 1000, -254, -1000}), Tensor::Scalar<float>(2.f), Tensor::Scalar<uint8_t>(128)}, 10);
  ASSERT_EQ(y.size(), 1u);
  EXPECT_TRUE(TensorsClose(y[0], Tensor::FromVector<uint8_t>({6}, {128, 129, 130, 255, 1, 0})));
}

TEST(QuantKernelsTest, QuantizeRoundsHalfToEvenAndSaturates) {
  Tensor x = F({8}, {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 300.f, -300.f});
  auto y = Both(MakeNode("QuantizeLinear", 3, 1), {x, Tensor::Scalar<float>(1.f), Tensor::Scalar<int8_t>(0)});
  EXPECT_TRUE(TensorsClose(y[0], Tensor::FromVector<int8_t>({8}, {0, 2, 2, 0, -2, -2, 127, -128})));
  // No zero point: uint8 with zero point 0; NaN maps to the zero point, Inf saturates.
  Tensor special = F({4}, {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity(), 3.f});
  auto u = Both(MakeNode("QuantizeLinear", 2, 1), {special, Tensor::Scalar<float>(2.f)});
  EXPECT_TRUE(TensorsClose(u[0], Tensor::FromVector<uint8_t>({4}, {0, 255, 0, 2})));
  auto z = Both(MakeNode("QuantizeLinear", 3, 1), {special, Tensor::Scalar<float>(2.f), Tensor::Scalar<int8_t>(-3)});
  EXPECT_TRUE(TensorsClose(z[0], Tensor::FromVector<int8_t>({4}, {-3, 127, -128, -1})));
}

TEST(QuantKernelsTest, QuantizePerAxis) {
  // The ONNX test_quantizelinear_axis case.
  Tensor x = F({1, 3, 3, 2}, {-162, 10, -100, 232, -20, -50, -76, 0, 0, 252, 32, -44, 245, -485, -960, -270, -375, -470});
  Tensor s = F({3}, {2, 4, 5});
  Tensor z = Tensor::FromVector<uint8_t>({3}, {84, 24, 196});
  auto y = Both(MakeNode("QuantizeLinear", 3, 1), {x, s, z});
  EXPECT_TRUE(TensorsClose(y[0], Tensor::FromVector<uint8_t>({1, 3, 3, 2}, {3, 89, 34, 200, 74, 59, 5, 24, 24, 87, 32,
                                                                           13, 245, 99, 4, 142, 121, 102})));
  Tensor x2 = F({2, 2}, {1.f, 1.f, 1.f, 1.f});
  auto y2 = Both(MakeNode("QuantizeLinear", 2, 1, Axis(0)), {x2, F({2}, {1.f, 0.25f})});
  EXPECT_TRUE(TensorsClose(y2[0], Tensor::FromVector<uint8_t>({2, 2}, {1, 1, 4, 4})));
}

TEST(QuantKernelsTest, QuantizeInt32Input) {
  Tensor x = Tensor::FromVector<int32_t>({3}, {5, -7, 1000});
  auto y = Both(MakeNode("QuantizeLinear", 3, 1), {x, Tensor::Scalar<float>(2.f), Tensor::Scalar<int8_t>(0)});
  EXPECT_TRUE(TensorsClose(y[0], Tensor::FromVector<int8_t>({3}, {2, -4, 127})));
}

TEST(QuantKernelsTest, Dequantize) {
  Tensor x = Tensor::FromVector<uint8_t>({4}, {0, 3, 128, 255});
  auto y = Both(MakeNode("DequantizeLinear", 3, 1), {x, Tensor::Scalar<float>(2.f), Tensor::Scalar<uint8_t>(128)}, 10);
  EXPECT_TRUE(TensorsClose(y[0], F({4}, {-256, -250, 0, 254})));
  Tensor i32 = Tensor::FromVector<int32_t>({3}, {-5, 0, 1 << 20});
  auto w = Both(MakeNode("DequantizeLinear", 2, 1), {i32, Tensor::Scalar<float>(0.5f)});
  EXPECT_TRUE(TensorsClose(w[0], F({3}, {-2.5f, 0.f, 524288.f})));
  // Per-axis along axis 1.
  Tensor xa = Tensor::FromVector<int8_t>({2, 2}, {1, 1, -1, -1});
  auto pa = Both(MakeNode("DequantizeLinear", 3, 1), {xa, F({2}, {1.f, 10.f}), Tensor::FromVector<int8_t>({2}, {0, 1})});
  EXPECT_TRUE(TensorsClose(pa[0], F({2, 2}, {1, 0, -1, -20})));
}

// Values on and around rounding ties, spanning the saturation bounds.
Tensor Ties(int64_t n, float scale) {
  Tensor t(DType::kFloat32, {n});
  float* p = t.data<float>();
  for (int64_t i = 0; i < n; ++i) p[i] = scale * (static_cast<float>(i % 1201) - 600.f) * 0.5f;
  return t;
}

TEST(QuantKernelsTest, CpuBitIdenticalOnLargeTensors) {
  for (float scale : {0.37f, 1.f, 0.0078125f}) {
    Tensor x = Ties(70001, scale);
    Both(MakeNode("QuantizeLinear", 3, 1), {x, Tensor::Scalar<float>(scale), Tensor::Scalar<uint8_t>(117)});
    Both(MakeNode("QuantizeLinear", 3, 1), {x, Tensor::Scalar<float>(scale), Tensor::Scalar<int8_t>(-5)});
  }
  Tensor img = RandomFloat({2, 16, 48, 48}, 21, -3.f, 3.f);
  Tensor s(DType::kFloat32, {16});
  Tensor z(DType::kInt8, {16});
  for (int c = 0; c < 16; ++c) {
    s.data<float>()[c] = 0.01f * static_cast<float>(c + 1);
    z.data<int8_t>()[c] = static_cast<int8_t>(c * 7 - 50);
  }
  auto q = Both(MakeNode("QuantizeLinear", 3, 1), {img, s, z});
  ASSERT_EQ(q.size(), 1u);
  auto back = Both(MakeNode("DequantizeLinear", 3, 1), {q[0], s, z});
  // The round trip is within half a step wherever nothing saturated.
  const float* xi = img.data<float>();
  const float* xb = back[0].data<float>();
  const int8_t* qi = q[0].data<int8_t>();
  for (int64_t i = 0; i < img.numel(); ++i) {
    const int64_t c = (i / (48 * 48)) % 16;
    if (qi[i] == -128 || qi[i] == 127) continue;
    ASSERT_LE(std::fabs(xi[i] - xb[i]), 0.5f * s.data<float>()[c] * 1.0001f) << i;
  }
  Both(MakeNode("DequantizeLinear", 3, 1, Axis(-3)), {RandomUInt8({2, 16, 48, 48}, 22), s,
                                                      RandomUInt8({16}, 23)});
  Both(MakeNode("DequantizeLinear", 3, 1), {RandomInt8({100000}, 24), Tensor::Scalar<float>(0.3f),
                                            Tensor::Scalar<int8_t>(3)});
}

TEST(QuantKernelsTest, KernelRejectsBadParameters) {
  Tensor x = F({2}, {1, 2});
  for (Backend p : ::whittle::testing::TestedBackends()) {
    auto r = RunNode(MakeNode("QuantizeLinear", 2, 1), 13, {x, Tensor::Scalar<float>(0.f)}, p);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("test_QuantizeLinear"), std::string::npos) << r.status().message();
    auto d = RunNode(MakeNode("DequantizeLinear", 2, 1), 13,
                     {Tensor::FromVector<uint8_t>({2}, {1, 2}), F({3}, {1, 1, 1})}, p);
    EXPECT_FALSE(d.ok());
  }
}

// ai.whittle Lookup: the reference's plain loop and the CPU's vector lookups agree on byte and
// float tables, uint8 and int8 inputs, short tails and the threaded blocks.
TEST(QuantKernelsTest, LookupBackendsMatchReference) {
  for (const int64_t n : {int64_t{1}, int64_t{37}, int64_t{70001}}) {
    Tensor xu = RandomUInt8({n}, 11), xs = RandomInt8({n}, 12);
    Tensor bytes(DType::kUInt8, {256}), sbytes(DType::kInt8, {256});
    Tensor floats = RandomFloat({256}, 13);
    for (int v = 0; v < 256; ++v) {
      bytes.data<uint8_t>()[v] = static_cast<uint8_t>(255 - v);
      sbytes.data<int8_t>()[v] = static_cast<int8_t>(v * 7);
    }
    const Node node = MakeNode("Lookup", 2, 1, {}, kWhittleDomain);
    for (const Tensor* x : {&xu, &xs})
      for (const Tensor* table : {&bytes, &sbytes, &floats}) {
        auto y = Both(node, {*x, *table});
        ASSERT_EQ(y.size(), 1u);
        const uint8_t* xb = static_cast<const uint8_t*>(x->raw_data());
        const size_t w = DTypeSize(table->dtype());
        for (int64_t i = 0; i < n; i += 997)
          EXPECT_EQ(std::memcmp(static_cast<const uint8_t*>(y[0].raw_data()) + i * w,
                                static_cast<const uint8_t*>(table->raw_data()) + xb[i] * w, w),
                    0);
      }
  }
}

}  // namespace
}  // namespace whittle
