// Pooling kernels: hand-computed values (indices, storage order, ceil mode, count_include_pad)
// and the CPU kernels against the reference over 1-D/2-D/3-D windows and their attributes.
#include <gtest/gtest.h>

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

template <class T>
std::vector<T> Values(const Tensor& t) {
  return std::vector<T>(t.data<T>(), t.data<T>() + t.numel());
}

Tensor Ramp(const Dims& dims, float start = 1.f) {
  Tensor t(DType::kFloat32, dims);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = start + static_cast<float>(i);
  return t;
}

TEST(MaxPoolReference, IndicesInBothStorageOrders) {
  const Tensor x = Ramp({1, 1, 5, 5});
  for (Backend p : ::whittle::testing::TestedBackends()) {
    // test_maxpool_with_argmax_2d_precomputed_strides (column-major indices).
    auto r = RunNode(MakeNode("MaxPool", 1, 2, Attrs({{"kernel_shape", Attribute::Ints({2, 2})},
                                                       {"strides", Attribute::Ints({2, 2})},
                                                       {"storage_order", Attribute::Int(1)}})),
                     12, {x}, p);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(Values<float>((*r)[0]), (std::vector<float>{7, 9, 17, 19}));
    EXPECT_EQ(Values<int64_t>((*r)[1]), (std::vector<int64_t>{6, 16, 8, 18}));
    // test_maxpool_with_argmax_2d_precomputed_pads (row-major indices).
    r = RunNode(MakeNode("MaxPool", 1, 2, Attrs({{"kernel_shape", Attribute::Ints({5, 5})},
                                                  {"pads", Attribute::Ints({2, 2, 2, 2})}})),
                12, {x}, p);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(Values<float>((*r)[0]), (std::vector<float>{13, 14, 15, 15, 15, 18, 19, 20, 20, 20, 23, 24, 25, 25, 25,
                                                          23, 24, 25, 25, 25, 23, 24, 25, 25, 25}));
    EXPECT_EQ(Values<int64_t>((*r)[1]), (std::vector<int64_t>{12, 13, 14, 14, 14, 17, 18, 19, 19, 19, 22, 23, 24, 24,
                                                              24, 22, 23, 24, 24, 24, 22, 23, 24, 24, 24}));
  }
  // Indices count whole planes: the second channel's indices start at 25.
  auto r = RunNode(MakeNode("MaxPool", 1, 2, Attrs({{"kernel_shape", Attribute::Ints({5, 5})}})), 12,
                   {Ramp({1, 2, 5, 5})}, Backend::kCpu);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Values<int64_t>((*r)[1]), (std::vector<int64_t>{24, 49}));
}

TEST(MaxPoolReference, CeilModeDilationsAndUint8) {
  for (Backend p : ::whittle::testing::TestedBackends()) {
    // test_maxpool_2d_ceil: 4x4 ramp, k3 s2 ceil -> 2x2.
    auto r = RunNode(MakeNode("MaxPool", 1, 1, Attrs({{"kernel_shape", Attribute::Ints({3, 3})},
                                                       {"strides", Attribute::Ints({2, 2})},
                                                       {"ceil_mode", Attribute::Int(1)}})),
                     12, {Ramp({1, 1, 4, 4})}, p);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(Values<float>((*r)[0]), (std::vector<float>{11, 12, 15, 16}));
    // test_maxpool_2d_dilations: 4x4 ramp, k2 d2 -> 2x2.
    r = RunNode(MakeNode("MaxPool", 1, 1, Attrs({{"kernel_shape", Attribute::Ints({2, 2})},
                                                  {"dilations", Attribute::Ints({2, 2})}})),
                12, {Ramp({1, 1, 4, 4})}, p);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(Values<float>((*r)[0]), (std::vector<float>{11, 12, 15, 16}));
    Tensor u(DType::kUInt8, {1, 1, 2, 3});
    for (int i = 0; i < 6; ++i) u.data<uint8_t>()[i] = static_cast<uint8_t>(200 + 10 * (i % 3) - i);
    r = RunNode(MakeNode("MaxPool", 1, 1, Attrs({{"kernel_shape", Attribute::Ints({2, 2})}})), 12, {u}, p);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(Values<uint8_t>((*r)[0]), (std::vector<uint8_t>{209, 218}));
  }
}

TEST(AveragePoolReference, CountIncludePad) {
  const Tensor x = Tensor::FromVector<float>({1, 1, 2, 2}, {1, 2, 3, 4});
  for (Backend p : ::whittle::testing::TestedBackends()) {
    for (int include : {0, 1}) {
      auto r = RunNode(MakeNode("AveragePool", 1, 1, Attrs({{"kernel_shape", Attribute::Ints({2, 2})},
                                                             {"pads", Attribute::Ints({1, 1, 1, 1})},
                                                             {"strides", Attribute::Ints({2, 2})},
                                                             {"count_include_pad", Attribute::Int(include)}})),
                       11, {x}, p);
      ASSERT_TRUE(r.ok()) << r.status().message();
      EXPECT_EQ(Values<float>((*r)[0]), include ? (std::vector<float>{0.25f, 0.5f, 0.75f, 1.f})
                                                : (std::vector<float>{1, 2, 3, 4}));
    }
    // Windows over a 3-wide row with k2 s1 pad 1 (1-D): (0+1)/1, (1+2)/2, (2+3)/2, 3/1.
    auto r = RunNode(MakeNode("AveragePool", 1, 1, Attrs({{"kernel_shape", Attribute::Ints({2})},
                                                           {"pads", Attribute::Ints({1, 1})}})),
                     11, {Ramp({1, 1, 3})}, p);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(Values<float>((*r)[0]), (std::vector<float>{1, 1.5f, 2.5f, 3}));
  }
}

TEST(GlobalPools, HandComputed) {
  const Tensor x = Tensor::FromVector<float>({1, 2, 2, 2}, {1, 2, 3, 4, -1, -5, -2, -3});
  for (Backend p : ::whittle::testing::TestedBackends()) {
    auto avg = RunNode(MakeNode("GlobalAveragePool", 1, 1), 17, {x}, p);
    auto mx = RunNode(MakeNode("GlobalMaxPool", 1, 1), 17, {x}, p);
    ASSERT_TRUE(avg.ok() && mx.ok());
    EXPECT_EQ((*avg)[0].dims(), (Dims{1, 2, 1, 1}));
    EXPECT_EQ(Values<float>((*avg)[0]), (std::vector<float>{2.5f, -2.75f}));
    EXPECT_EQ(Values<float>((*mx)[0]), (std::vector<float>{4, -1}));
  }
}

TEST(PoolCpu, MatchesReference) {
  struct Case {
    std::string op;
    Dims x;
    std::vector<std::pair<std::string, Attribute>> attrs;
  };
  const std::vector<Case> cases = {
      {"MaxPool", {64, 16, 28, 28}, {{"kernel_shape", Attribute::Ints({2, 2})}, {"strides", Attribute::Ints({2, 2})}}},
      {"MaxPool", {2, 3, 9, 7}, {{"kernel_shape", Attribute::Ints({2, 2})}, {"strides", Attribute::Ints({2, 2})}}},
      {"MaxPool", {2, 3, 9, 7}, {{"kernel_shape", Attribute::Ints({3, 3})}, {"pads", Attribute::Ints({1, 1, 1, 1})},
                                 {"strides", Attribute::Ints({2, 2})}}},
      {"MaxPool", {1, 2, 10, 11}, {{"kernel_shape", Attribute::Ints({3, 2})}, {"dilations", Attribute::Ints({2, 3})},
                                   {"pads", Attribute::Ints({2, 0, 1, 3})}}},
      {"MaxPool", {1, 2, 8, 9}, {{"kernel_shape", Attribute::Ints({3, 3})}, {"strides", Attribute::Ints({2, 2})},
                                 {"ceil_mode", Attribute::Int(1)}}},
      {"MaxPool", {1, 3, 8, 8}, {{"kernel_shape", Attribute::Ints({2, 2})}, {"auto_pad", Attribute::String("SAME_UPPER")}}},
      {"MaxPool", {1, 3, 8, 8}, {{"kernel_shape", Attribute::Ints({3, 3})}, {"auto_pad", Attribute::String("SAME_LOWER")},
                                 {"strides", Attribute::Ints({2, 2})}}},
      {"MaxPool", {2, 3, 17}, {{"kernel_shape", Attribute::Ints({4})}, {"strides", Attribute::Ints({3})},
                               {"pads", Attribute::Ints({1, 2})}}},
      {"MaxPool", {1, 2, 5, 6, 7}, {{"kernel_shape", Attribute::Ints({2, 2, 2})}, {"pads", Attribute::Ints({1, 0, 1, 0, 1, 0})}}},
      {"AveragePool", {2, 3, 9, 7}, {{"kernel_shape", Attribute::Ints({3, 3})}, {"pads", Attribute::Ints({1, 1, 1, 1})}}},
      {"AveragePool", {2, 3, 9, 7}, {{"kernel_shape", Attribute::Ints({3, 3})}, {"pads", Attribute::Ints({1, 2, 2, 1})},
                                     {"count_include_pad", Attribute::Int(1)}, {"strides", Attribute::Ints({2, 1})}}},
      {"AveragePool", {1, 2, 8, 9}, {{"kernel_shape", Attribute::Ints({3, 3})}, {"strides", Attribute::Ints({2, 2})},
                                     {"ceil_mode", Attribute::Int(1)}}},
      {"AveragePool", {1, 2, 8, 9}, {{"kernel_shape", Attribute::Ints({3, 3})}, {"strides", Attribute::Ints({2, 2})},
                                     {"ceil_mode", Attribute::Int(1)}, {"count_include_pad", Attribute::Int(1)},
                                     {"pads", Attribute::Ints({1, 1, 1, 1})}}},
      {"AveragePool", {1, 3, 8, 8}, {{"kernel_shape", Attribute::Ints({2, 2})}, {"auto_pad", Attribute::String("SAME_LOWER")}}},
      {"AveragePool", {1, 3, 9, 9}, {{"kernel_shape", Attribute::Ints({3, 3})}, {"auto_pad", Attribute::String("VALID")},
                                     {"strides", Attribute::Ints({2, 2})}}},
      {"AveragePool", {2, 3, 17}, {{"kernel_shape", Attribute::Ints({3})}, {"count_include_pad", Attribute::Int(1)},
                                   {"pads", Attribute::Ints({1, 1})}}},
      {"AveragePool", {1, 2, 4, 5, 6}, {{"kernel_shape", Attribute::Ints({2, 3, 2})}, {"strides", Attribute::Ints({2, 1, 2})}}},
      {"GlobalAveragePool", {2, 3, 5, 6}, {}},
      {"GlobalMaxPool", {2, 3, 5, 6}, {}},
      {"GlobalAveragePool", {64, 32, 7, 7}, {}},
      {"GlobalMaxPool", {2, 3, 7}, {}},
      {"GlobalAveragePool", {1, 2, 3, 4, 5}, {}},
  };
  uint32_t seed = 1;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op + " " + DimsToString(c.x) + " #" + std::to_string(seed));
    const Tensor x = RandomFloat(c.x, seed++);
    AttributeMap a = Attrs(c.attrs);
    for (int threads : {1, 2}) ExpectBackendsMatchReference(MakeNode(c.op, 1, 1, a), {x}, 1e-5f, 1e-5f, 12, threads);
  }
}

// The 2x2/stride-2 float rows run 8 outputs per vector step and the last 1-7 as one masked step:
// every tail length, odd input widths (a column left over) and planes of one output row.
TEST(PoolCpu, MaxPool2x2EveryRowTail) {
  for (int64_t w = 2; w <= 37; ++w) {
    for (int64_t h : {2, 5}) {
      SCOPED_TRACE("width " + std::to_string(w) + " height " + std::to_string(h));
      const Tensor x = RandomFloat({2, 3, h, w}, static_cast<uint32_t>(w * 10 + h));
      ExpectBackendsMatchReference(MakeNode("MaxPool", 1, 1,
                                            Attrs({{"kernel_shape", Attribute::Ints({2, 2})},
                                                   {"strides", Attribute::Ints({2, 2})}})),
                                   {x}, 0.f, 0.f, 12, 1);
    }
  }
}

// The quantized CNN pools uint8/int8 activations between QConv nodes: the CPU MaxPool runs on
// 8-bit data (AVX2 2x2 path and the general window loop) and must equal the reference bit for bit.
TEST(PoolCpu, EightBitMaxPoolMatchesReference) {
  const std::vector<std::pair<Dims, AttributeMap>> cases = {
      {{64, 16, 28, 28}, Attrs({{"kernel_shape", Attribute::Ints({2, 2})}, {"strides", Attribute::Ints({2, 2})}})},
      {{2, 3, 130, 131}, Attrs({{"kernel_shape", Attribute::Ints({2, 2})}, {"strides", Attribute::Ints({2, 2})}})},
      {{2, 3, 9, 7}, Attrs({{"kernel_shape", Attribute::Ints({3, 3})}, {"pads", Attribute::Ints({1, 1, 1, 1})},
                            {"strides", Attribute::Ints({2, 2})}})},
      // ResNet's stem pool (3x3, stride 2, pad 1) on long rows: the stride-2 loop.
      {{1, 4, 112, 111}, Attrs({{"kernel_shape", Attribute::Ints({3, 3})}, {"pads", Attribute::Ints({1, 1, 1, 1})},
                                {"strides", Attribute::Ints({2, 2})}})},
      {{1, 2, 10, 11}, Attrs({{"kernel_shape", Attribute::Ints({3, 2})}, {"dilations", Attribute::Ints({2, 3})},
                              {"pads", Attribute::Ints({2, 0, 1, 3})}})},
      {{2, 3, 17}, Attrs({{"kernel_shape", Attribute::Ints({4})}, {"strides", Attribute::Ints({3})},
                          {"pads", Attribute::Ints({1, 2})}})},
  };
  uint32_t seed = 100;
  for (const auto& [dims, attrs] : cases) {
    for (bool is_signed : {false, true}) {
      SCOPED_TRACE(DimsToString(dims) + (is_signed ? " int8" : " uint8"));
      const Tensor x = is_signed ? ::whittle::testing::RandomInt8(dims, seed++)
                                 : ::whittle::testing::RandomUInt8(dims, seed++);
      for (int threads : {1, 2}) {
        const auto ref = ExpectBackendsMatchReference(MakeNode("MaxPool", 1, 1, attrs), {x}, 0.f, 0.f, 12, threads);
        ASSERT_EQ(ref.size(), 1u);
        EXPECT_EQ(ref[0].dtype(), x.dtype());
      }
    }
  }
}

TEST(PoolCpu, RejectsWindowLargerThanInput) {
  auto r = RunNode(MakeNode("MaxPool", 1, 1, Attrs({{"kernel_shape", Attribute::Ints({4, 4})}})), 12,
                   {RandomFloat({1, 1, 3, 3}, 1)}, Backend::kCpu);
  EXPECT_FALSE(r.ok());
  r = RunNode(MakeNode("AveragePool", 1, 1, Attrs({{"kernel_shape", Attribute::Ints({2, 2})}})), 12,
              {RandomFloat({1, 3}, 1)}, Backend::kCpu);
  EXPECT_FALSE(r.ok());
}

}  // namespace
}  // namespace whittle
