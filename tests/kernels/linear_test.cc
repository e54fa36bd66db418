// Gemm and MatMul kernels: the reference against hand-computed values, the CPU kernels against
// the reference over transposes, C broadcasts, 1-D promotion, batch broadcast, constant weights
// and fused activations.
#include <gtest/gtest.h>

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

template <class T>
std::vector<T> Values(const Tensor& t) {
  return std::vector<T>(t.data<T>(), t.data<T>() + t.numel());
}

// Compares CPU and reference with every input constant (the prepacking path).
void ExpectConstPathMatches(const Node& n, const std::vector<Tensor>& in) {
  auto ref = RunNode(n, 17, in, Backend::kReference, 1, true);
  auto cpu = RunNode(n, 17, in, Backend::kCpu, 2, true);
  ASSERT_TRUE(ref.ok()) << ref.status().message();
  ASSERT_TRUE(cpu.ok()) << cpu.status().message();
  EXPECT_TRUE(TensorsClose((*cpu)[0], (*ref)[0], 1e-4f, 1e-4f));
}

TEST(GemmReference, HandComputed) {
  const Tensor a = Tensor::FromVector<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor b = Tensor::FromVector<float>({3, 2}, {1, 0, 0, 1, 1, 1});
  const Tensor c = Tensor::FromVector<float>({2}, {10, 20});
  // A*B = [[4, 5], [10, 11]]; 2*A*B + 0.5*C.
  for (Backend p : {Backend::kReference, Backend::kCpu}) {
    auto r = RunNode(MakeNode("Gemm", 3, 1, Attrs({{"alpha", Attribute::Float(2.f)}, {"beta", Attribute::Float(0.5f)}})),
                     17, {a, b, c}, p);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(Values<float>((*r)[0]), (std::vector<float>{13, 20, 25, 32}));
    // transA, transB on the transposed operands give the same product (no C).
    const Tensor at = Tensor::FromVector<float>({3, 2}, {1, 4, 2, 5, 3, 6});
    const Tensor bt = Tensor::FromVector<float>({2, 3}, {1, 0, 1, 0, 1, 1});
    r = RunNode(MakeNode("Gemm", 2, 1, Attrs({{"transA", Attribute::Int(1)}, {"transB", Attribute::Int(1)}})), 17,
                {at, bt}, p);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(Values<float>((*r)[0]), (std::vector<float>{4, 5, 10, 11}));
  }
  // Integer Gemm.
  auto r = RunNode(MakeNode("Gemm", 3, 1), 17,
                   {Tensor::FromVector<int32_t>({1, 2}, {3, 4}), Tensor::FromVector<int32_t>({2, 1}, {5, 6}),
                    Tensor::FromVector<int32_t>({1}, {7})},
                   Backend::kCpu);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Values<int32_t>((*r)[0]), (std::vector<int32_t>{46}));
}

TEST(GemmCpu, MatchesReferenceOverTransposesAndBiasShapes) {
  const int64_t M = 5, N = 7, K = 9;
  const std::vector<Dims> c_shapes = {{}, {1}, {N}, {1, N}, {M, 1}, {M, N}, {1, 1}};
  uint32_t seed = 1;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (size_t ci = 0; ci <= c_shapes.size(); ++ci) {
        SCOPED_TRACE("ta=" + std::to_string(ta) + " tb=" + std::to_string(tb) + " c=" + std::to_string(ci));
        std::vector<Tensor> in = {RandomFloat(ta ? Dims{K, M} : Dims{M, K}, seed++),
                                  RandomFloat(tb ? Dims{N, K} : Dims{K, N}, seed++)};
        if (ci < c_shapes.size()) in.push_back(RandomFloat(c_shapes[ci], seed++));
        const Node n = MakeNode("Gemm", static_cast<int>(in.size()), 1,
                                Attrs({{"transA", Attribute::Int(ta)}, {"transB", Attribute::Int(tb)},
                                       {"alpha", Attribute::Float(0.75f)}, {"beta", Attribute::Float(-1.5f)}}));
        ExpectBackendsMatchReference(n, in, 1e-4f, 1e-4f);
        ExpectConstPathMatches(n, in);
      }
}

TEST(GemmCpu, MlpShapesAndFusedActivations) {
  // Batch 1 and 64 of a 784-256 layer in the PyTorch layout (transB), bias [N].
  for (int64_t m : {1, 64}) {
    const std::vector<Tensor> in = {RandomFloat({m, 784}, 1), RandomFloat({256, 784}, 2, -0.05f, 0.05f),
                                    RandomFloat({256}, 3)};
    for (const char* act : {"", "Relu", "Sigmoid", "Tanh"}) {
      AttributeMap a = Attrs({{"transB", Attribute::Int(1)}});
      if (*act) a.Set("_activation", Attribute::String(act));
      const Node n = MakeNode("Gemm", 3, 1, a);
      ExpectBackendsMatchReference(n, in, 1e-4f, 1e-4f);
      ExpectConstPathMatches(n, in);
    }
  }
  // Relu really clamps: compare with the unfused result.
  const std::vector<Tensor> in = {RandomFloat({3, 4}, 5), RandomFloat({4, 6}, 6), RandomFloat({6}, 7)};
  auto plain = RunNode(MakeNode("Gemm", 3, 1), 17, in, Backend::kCpu);
  auto fused = RunNode(MakeNode("Gemm", 3, 1, Attrs({{"_activation", Attribute::String("Relu")}})), 17, in,
                       Backend::kCpu, 1, true);
  ASSERT_TRUE(plain.ok() && fused.ok());
  for (int64_t i = 0; i < 18; ++i) {
    const float p = (*plain)[0].data<float>()[i];
    EXPECT_NEAR((*fused)[0].data<float>()[i], p > 0 ? p : 0.f, 1e-6f);
  }
}

TEST(GemmCpu, RejectsMismatchedInnerDims) {
  auto r = RunNode(MakeNode("Gemm", 2, 1), 17, {RandomFloat({2, 3}, 1), RandomFloat({4, 2}, 2)}, Backend::kCpu);
  EXPECT_FALSE(r.ok());
}

TEST(MatMulReference, HandComputedAndPromotion) {
  const Tensor a = Tensor::FromVector<float>({2, 2}, {1, 2, 3, 4});
  const Tensor b = Tensor::FromVector<float>({2, 2}, {5, 6, 7, 8});
  const Tensor v = Tensor::FromVector<float>({2}, {1, 1});
  for (Backend p : {Backend::kReference, Backend::kCpu}) {
    auto r = RunNode(MakeNode("MatMul", 2, 1), 17, {a, b}, p);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(Values<float>((*r)[0]), (std::vector<float>{19, 22, 43, 50}));
    r = RunNode(MakeNode("MatMul", 2, 1), 17, {v, b}, p);  // [2] x [2,2] -> [2]
    ASSERT_TRUE(r.ok());
    EXPECT_EQ((*r)[0].dims(), (Dims{2}));
    EXPECT_EQ(Values<float>((*r)[0]), (std::vector<float>{12, 14}));
    r = RunNode(MakeNode("MatMul", 2, 1), 17, {a, v}, p);  // [2,2] x [2] -> [2]
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(Values<float>((*r)[0]), (std::vector<float>{3, 7}));
    r = RunNode(MakeNode("MatMul", 2, 1), 17, {v, v}, p);  // [2] x [2] -> []
    ASSERT_TRUE(r.ok());
    EXPECT_EQ((*r)[0].dims(), Dims{});
    EXPECT_EQ(Values<float>((*r)[0]), (std::vector<float>{2}));
  }
  auto r = RunNode(MakeNode("MatMul", 2, 1), 17,
                   {Tensor::FromVector<int64_t>({1, 2}, {2, 3}), Tensor::FromVector<int64_t>({2, 1}, {4, 5})},
                   Backend::kCpu);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Values<int64_t>((*r)[0]), (std::vector<int64_t>{23}));
}

TEST(MatMulCpu, MatchesReferenceOnBatchedAndBroadcastShapes) {
  const std::vector<std::pair<Dims, Dims>> shapes = {
      {{3, 4}, {4, 5}},          {{2, 3, 4}, {2, 4, 5}},       {{1, 2, 3, 4}, {1, 2, 4, 3}},
      {{2, 3, 4}, {4, 5}},       {{3, 4}, {2, 4, 5}},          {{2, 1, 3, 4}, {3, 4, 5}},
      {{4}, {2, 4, 5}},          {{2, 3, 4}, {4}},             {{5, 1, 2, 6}, {3, 6, 4}},
      {{64, 784}, {784, 256}},   {{1, 784}, {784, 256}},       {{8, 3, 0}, {0, 4}},
  };
  uint32_t seed = 1;
  for (const auto& [da, db] : shapes) {
    SCOPED_TRACE(DimsToString(da) + " x " + DimsToString(db));
    const std::vector<Tensor> in = {RandomFloat(da, seed++), RandomFloat(db, seed++)};
    for (int threads : {1, 2}) ExpectBackendsMatchReference(MakeNode("MatMul", 2, 1), in, 1e-4f, 1e-4f, 17, threads);
    ExpectConstPathMatches(MakeNode("MatMul", 2, 1), in);
  }
  const std::vector<Tensor> in = {RandomFloat({4, 6}, 1), RandomFloat({6, 3}, 2)};
  ExpectBackendsMatchReference(MakeNode("MatMul", 2, 1, Attrs({{"_activation", Attribute::String("LeakyRelu")},
                                                            {"_alpha", Attribute::Float(0.2f)}})),
                            in, 1e-5f, 1e-5f);
}

TEST(MatMulCpu, RejectsMismatchedInnerDims) {
  auto r = RunNode(MakeNode("MatMul", 2, 1), 17, {RandomFloat({2, 3}, 1), RandomFloat({4, 2}, 2)}, Backend::kCpu);
  EXPECT_FALSE(r.ok());
}

}  // namespace
}  // namespace whittle
