// Data-movement kernels: hand-computed cases for the reference (negative Slice steps, negative
// Gather indices, Pad reflect/edge, uneven Split ...) and the fast CPU kernels compared against
// the reference on shapes that exercise their fast paths (NCHW<->NHWC, merged axes, threads).
#include <gtest/gtest.h>

#include <limits>
#include <numeric>
#include <vector>

#include "tests/util/test_util.h"

namespace whittle {
namespace {

using ::whittle::testing::ExpectBackendsMatchReference;
using ::whittle::testing::MakeNode;
using ::whittle::testing::RandomFloat;
using ::whittle::testing::RandomInt64;
using ::whittle::testing::RandomUInt8;
using ::whittle::testing::TensorsClose;

AttributeMap Attrs(std::initializer_list<std::pair<const std::string, Attribute>> kv) {
  AttributeMap a;
  for (const auto& [k, v] : kv) a.Set(k, v);
  return a;
}

Tensor I64(std::vector<int64_t> v) { return Tensor::FromVector<int64_t>({static_cast<int64_t>(v.size())}, v); }

// 0, 1, 2, ... as float with the given dims.
Tensor Iota(const Dims& dims) {
  Tensor t(DType::kFloat32, dims);
  std::iota(t.data<float>(), t.data<float>() + t.numel(), 0.f);
  return t;
}

Tensor F(const Dims& dims, std::vector<float> v) { return Tensor::FromVector<float>(dims, v); }

// Reference outputs, also checked against the CPU kernels.
std::vector<Tensor> Both(const Node& n, const std::vector<Tensor>& in, int opset = 13) {
  return ExpectBackendsMatchReference(n, in, 0.f, 0.f, opset);
}

TEST(MovementKernelsTest, TransposeHandComputed) {
  auto out = Both(MakeNode("Transpose", 1, 1), {Iota({2, 3})});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(TensorsClose(out[0], F({3, 2}, {0, 3, 1, 4, 2, 5})));
  auto p = Both(MakeNode("Transpose", 1, 1, Attrs({{"perm", Attribute::Ints({1, 0, 2})}})), {Iota({2, 2, 2})});
  EXPECT_TRUE(TensorsClose(p[0], F({2, 2, 2}, {0, 1, 4, 5, 2, 3, 6, 7})));
}

TEST(MovementKernelsTest, TransposeCpuMatchesReference) {
  const std::vector<std::pair<Dims, std::vector<int64_t>>> cases = {
      {{2, 3, 4, 5}, {0, 2, 3, 1}},      // NCHW -> NHWC
      {{2, 4, 5, 3}, {0, 3, 1, 2}},      // NHWC -> NCHW
      {{1, 37, 19, 1}, {3, 2, 0, 1}},    // size-1 axes dropped
      {{3, 4, 5}, {1, 0, 2}},            // innermost axis stays: run copies
      {{2, 3, 2, 3, 2}, {4, 2, 0, 3, 1}},
      {{1, 64, 32, 33}, {0, 2, 3, 1}},   // large enough to use threads
      {{7}, {0}},
  };
  for (const auto& [dims, perm] : cases) {
    Node n = MakeNode("Transpose", 1, 1, Attrs({{"perm", Attribute::Ints(perm)}}));
    Both(n, {RandomFloat(dims, 1)});
    Both(n, {RandomInt64(dims, 2, -1000, 1000)});
    Both(n, {RandomUInt8(dims, 3)});
  }
}

TEST(MovementKernelsTest, Concat) {
  auto out = Both(MakeNode("Concat", 2, 1, Attrs({{"axis", Attribute::Int(1)}})), {Iota({2, 2}), F({2, 1}, {9, 8})});
  EXPECT_TRUE(TensorsClose(out[0], F({2, 3}, {0, 1, 9, 2, 3, 8})));
  Tensor a = Tensor::FromVector<bool>({1, 2}, {true, false}), b = Tensor::FromVector<bool>({2, 2}, {false, true, true, true});
  auto bo = Both(MakeNode("Concat", 2, 1, Attrs({{"axis", Attribute::Int(-2)}})), {a, b});
  EXPECT_TRUE(TensorsClose(bo[0], Tensor::FromVector<bool>({3, 2}, {true, false, false, true, true, true})));
  Node n3 = MakeNode("Concat", 3, 1, Attrs({{"axis", Attribute::Int(1)}}));
  Both(n3, {RandomFloat({2, 3, 8, 8}, 4), RandomFloat({2, 0, 8, 8}, 5), RandomFloat({2, 5, 8, 8}, 6)});
  Both(n3, {RandomFloat({1, 64, 32, 16}, 4), RandomFloat({1, 32, 32, 16}, 5), RandomFloat({1, 64, 32, 16}, 6)});
}

TEST(MovementKernelsTest, SplitUneven) {
  Node attr = MakeNode("Split", 1, 2, Attrs({{"axis", Attribute::Int(1)}, {"split", Attribute::Ints({1, 2})}}));
  auto out = Both(attr, {Iota({2, 3})}, 11);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(TensorsClose(out[0], F({2, 1}, {0, 3})));
  EXPECT_TRUE(TensorsClose(out[1], F({2, 2}, {1, 2, 4, 5})));
  Node input = MakeNode("Split", 2, 3);
  auto z = Both(input, {Iota({5}), I64({2, 0, 3})});
  EXPECT_TRUE(TensorsClose(z[0], F({2}, {0, 1})));
  EXPECT_EQ(z[1].dims(), (Dims{0}));
  EXPECT_TRUE(TensorsClose(z[2], F({3}, {2, 3, 4})));
  auto eq = Both(MakeNode("Split", 1, 2), {RandomInt64({6, 40, 50}, 7, -5, 5)});
  EXPECT_EQ(eq[1].dims(), (Dims{3, 40, 50}));
}

TEST(MovementKernelsTest, SliceNegativeSteps) {
  Node n = MakeNode("Slice", 5, 1);
  auto a = Both(n, {Iota({10}), I64({8}), I64({2}), I64({0}), I64({-2})});
  EXPECT_TRUE(TensorsClose(a[0], F({3}, {8, 6, 4})));
  // Reverse everything: end clamps to -1 with a negative step.
  auto r = Both(n, {Iota({4}), I64({-1}), I64({std::numeric_limits<int64_t>::min()}), I64({0}), I64({-1})});
  EXPECT_TRUE(TensorsClose(r[0], F({4}, {3, 2, 1, 0})));
  // Start past the end clamps to d-1.
  auto c = Both(n, {Iota({2, 3}), I64({100, 100}), I64({-100, 0}), I64({0, 1}), I64({-1, -1})});
  EXPECT_TRUE(TensorsClose(c[0], F({2, 2}, {5, 4, 2, 1})));
}

TEST(MovementKernelsTest, SliceClampingAndDefaults) {
  Node three = MakeNode("Slice", 3, 1);
  auto a = Both(three, {Iota({3, 4}), I64({1, -3}), I64({1000, -1})});
  EXPECT_TRUE(TensorsClose(a[0], F({2, 2}, {5, 6, 9, 10})));
  // Huge steps take one element (and must not overflow offset arithmetic).
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max(), kMin = std::numeric_limits<int64_t>::min();
  Node five = MakeNode("Slice", 5, 1);
  auto hp = Both(five, {Iota({5, 3}), I64({1}), I64({kMax}), I64({0}), I64({kMax})});
  EXPECT_TRUE(TensorsClose(hp[0], F({1, 3}, {3, 4, 5})));
  auto hn = Both(five, {Iota({5, 3}), I64({-1}), I64({kMin}), I64({0}), I64({kMin})});
  EXPECT_TRUE(TensorsClose(hn[0], F({1, 3}, {12, 13, 14})));
  auto e = Both(three, {Iota({3}), I64({5}), I64({10})});
  EXPECT_EQ(e[0].dims(), (Dims{0}));
  Node old = MakeNode("Slice", 1, 1,
                      Attrs({{"starts", Attribute::Ints({1})}, {"ends", Attribute::Ints({3})}, {"axes", Attribute::Ints({1})}}));
  auto o = Both(old, {Iota({2, 4})}, 9);
  EXPECT_TRUE(TensorsClose(o[0], F({2, 2}, {1, 2, 5, 6})));
}

TEST(MovementKernelsTest, SliceCpuMatchesReference) {
  Node n = MakeNode("Slice", 5, 1);
  Tensor x = RandomFloat({3, 8, 9, 10}, 8);
  Both(n, {x, I64({1, 0}), I64({7, 100}), I64({1, 3}), I64({2, 1})});     // trailing full axes merge
  Both(n, {x, I64({-1, 8}), I64({0, 0}), I64({-1, 2}), I64({-3, -2})});  // negative inner step
  Both(n, {x, I64({0}), I64({2}), I64({0}), I64({1})});
  Both(n, {RandomInt64({4, 300, 300}, 9, -9, 9), I64({1}), I64({299}), I64({1}), I64({1})});  // threads
}

TEST(MovementKernelsTest, GatherNegativeIndices) {
  Tensor data = Iota({5});
  auto a = Both(MakeNode("Gather", 2, 1), {data, I64({0, -1, -5, 2})});
  EXPECT_TRUE(TensorsClose(a[0], F({4}, {0, 4, 0, 2})));
  auto b = Both(MakeNode("Gather", 2, 1, Attrs({{"axis", Attribute::Int(1)}})),
                {Iota({2, 3}), Tensor::FromVector<int32_t>({1, 2}, {2, -3})});
  EXPECT_TRUE(TensorsClose(b[0], F({2, 1, 2}, {2, 0, 5, 3})));
  auto s = Both(MakeNode("Gather", 2, 1), {Iota({3, 2}), Tensor::Scalar<int64_t>(-1)});
  EXPECT_TRUE(TensorsClose(s[0], F({2}, {4, 5})));
  Both(MakeNode("Gather", 2, 1, Attrs({{"axis", Attribute::Int(-2)}})),
       {RandomUInt8({4, 50, 30}, 10), RandomInt64({7, 3}, 11, -50, 49)});
  Both(MakeNode("Gather", 2, 1), {RandomFloat({1000, 128}, 12), RandomInt64({600}, 13, -1000, 999)});
}

// Every backend gives the reference's error, word for word (the CUDA Gather from its device check
// report, read once the kernel is done).
TEST(MovementKernelsTest, GatherIndexOutOfRangeIsComputeError) {
  auto ref = RunNode(MakeNode("Gather", 2, 1), 13, {Iota({5}), I64({1, 5})}, Backend::kReference);
  ASSERT_FALSE(ref.ok());
  EXPECT_NE(ref.status().message().find("index 5 at position 1"), std::string::npos) << ref.status().message();
  for (Backend p : ::whittle::testing::TestedBackends()) {
    SCOPED_TRACE(BackendName(p));
    auto r = RunNode(MakeNode("Gather", 2, 1), 13, {Iota({5}), I64({1, 5})}, p);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kOutOfRange);
    EXPECT_EQ(r.status().message(), ref.status().message());
    EXPECT_NE(r.status().message().find("test_Gather"), std::string::npos) << r.status().message();
    auto neg = RunNode(MakeNode("Gather", 2, 1, Attrs({{"axis", Attribute::Int(-1)}})), 13,
                       {Iota({2, 5}), Tensor::FromVector<int32_t>({1}, {-6})}, p);
    ASSERT_FALSE(neg.ok());
    EXPECT_NE(neg.status().message().find("index -6 at position 0 is out of range for axis 1 of size 5"),
              std::string::npos)
        << neg.status().message();
  }
}

TEST(MovementKernelsTest, Expand) {
  auto a = Both(MakeNode("Expand", 2, 1), {F({2, 1}, {1, 2}), I64({2, 2, 3})});
  EXPECT_TRUE(TensorsClose(a[0], F({2, 2, 3}, {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2})));
  auto b = Both(MakeNode("Expand", 2, 1), {F({3}, {1, 2, 3}), I64({2, 1})});
  EXPECT_TRUE(TensorsClose(b[0], F({2, 3}, {1, 2, 3, 1, 2, 3})));
  Both(MakeNode("Expand", 2, 1), {RandomInt64({1, 64, 1}, 14, 0, 9), I64({8, 64, 200})});
  Both(MakeNode("Expand", 2, 1), {Tensor::Scalar<bool>(true), I64({3, 4})});
}

TEST(MovementKernelsTest, PadModes) {
  Tensor x = F({4}, {1, 2, 3, 4});
  Tensor pads = I64({2, 3});
  auto c = Both(MakeNode("Pad", 3, 1), {x, pads, Tensor::Scalar<float>(9.f)});
  EXPECT_TRUE(TensorsClose(c[0], F({9}, {9, 9, 1, 2, 3, 4, 9, 9, 9})));
  auto r = Both(MakeNode("Pad", 2, 1, Attrs({{"mode", Attribute::String("reflect")}})), {x, pads});
  EXPECT_TRUE(TensorsClose(r[0], F({9}, {3, 2, 1, 2, 3, 4, 3, 2, 1})));
  auto e = Both(MakeNode("Pad", 2, 1, Attrs({{"mode", Attribute::String("edge")}})), {x, pads});
  EXPECT_TRUE(TensorsClose(e[0], F({9}, {1, 1, 1, 2, 3, 4, 4, 4, 4})));
  // 2-D reflect over both axes.
  auto r2 = Both(MakeNode("Pad", 2, 1, Attrs({{"mode", Attribute::String("reflect")}})),
                 {Iota({2, 3}), I64({1, 0, 0, 1})});
  EXPECT_TRUE(TensorsClose(r2[0], F({3, 4}, {3, 4, 5, 4, 0, 1, 2, 1, 3, 4, 5, 4})));
  // Negative pads crop; the constant defaults to 0.
  auto crop = Both(MakeNode("Pad", 2, 1), {Iota({2, 3}), I64({0, -1, 1, 0})});
  EXPECT_TRUE(TensorsClose(crop[0], F({3, 2}, {1, 2, 4, 5, 0, 0})));
}

TEST(MovementKernelsTest, PadOldOpsetAndDtypes) {
  Node old = MakeNode("Pad", 1, 1, Attrs({{"pads", Attribute::Ints({1, 1})}, {"value", Attribute::Float(-1.f)}}));
  auto a = Both(old, {Tensor::FromVector<int32_t>({2}, {5, 6})}, 10);
  EXPECT_TRUE(TensorsClose(a[0], Tensor::FromVector<int32_t>({4}, {-1, 5, 6, -1})));
  auto h = Both(old, {Tensor(DType::kFloat16, {1})}, 10);  // -1.0 in half is 0xBC00
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(static_cast<const uint16_t*>(h[0].raw_data())[0], 0xBC00);
  EXPECT_EQ(static_cast<const uint16_t*>(h[0].raw_data())[1], 0);
}

TEST(MovementKernelsTest, PadCpuMatchesReference) {
  Tensor x = RandomFloat({2, 3, 17, 19}, 15);
  Tensor pads = I64({0, 1, 3, 2, 1, 0, 4, 5});
  for (const char* mode : {"constant", "reflect", "edge"}) {
    Node n = MakeNode("Pad", 3, 1, Attrs({{"mode", Attribute::String(mode)}}));
    Both(n, {x, pads, Tensor::Scalar<float>(0.5f)});
    Both(n, {x, I64({0, 0, -2, 1, 0, 0, 3, -4}), Tensor()});
    Both(n, {RandomUInt8({1, 16, 128, 130}, 16), I64({0, 0, 2, 2, 0, 0, 2, 2}), Tensor()});  // threads
  }
}

TEST(MovementKernelsTest, TileAndRange) {
  auto t = Both(MakeNode("Tile", 2, 1), {F({2, 2}, {1, 2, 3, 4}), I64({1, 2})});
  EXPECT_TRUE(TensorsClose(t[0], F({2, 4}, {1, 2, 1, 2, 3, 4, 3, 4})));
  auto r = Both(MakeNode("Range", 3, 1), {Tensor::Scalar<float>(1.f), Tensor::Scalar<float>(5.f), Tensor::Scalar<float>(1.5f)}, 11);
  EXPECT_TRUE(TensorsClose(r[0], F({3}, {1.f, 2.5f, 4.f})));
  auto ri = Both(MakeNode("Range", 3, 1),
                 {Tensor::Scalar<int32_t>(10), Tensor::Scalar<int32_t>(6), Tensor::Scalar<int32_t>(-3)}, 11);
  EXPECT_TRUE(TensorsClose(ri[0], Tensor::FromVector<int32_t>({2}, {10, 7})));
}

}  // namespace
}  // namespace whittle
