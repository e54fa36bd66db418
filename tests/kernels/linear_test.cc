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

// ---- Einsum ----

StatusOr<std::vector<Tensor>> RunEinsum(const std::string& eq, const std::vector<Tensor>& in, int opset = 17) {
  return RunNode(MakeNode("Einsum", static_cast<int>(in.size()), 1, Attrs({{"equation", Attribute::String(eq)}})),
                 opset, in, Backend::kCpu);
}

TEST(EinsumReference, HandComputed) {
  const Tensor a = Tensor::FromVector<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor b = Tensor::FromVector<float>({3, 2}, {1, 0, 0, 1, 1, 1});
  const Tensor sq = Tensor::FromVector<float>({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  struct Case {
    std::string eq;
    std::vector<Tensor> in;
    Dims dims;
    std::vector<float> want;
  };
  const std::vector<Case> cases = {
      {"ij,jk->ik", {a, b}, {2, 2}, {4, 5, 10, 11}},
      {"ij,jk", {a, b}, {2, 2}, {4, 5, 10, 11}},                 // implicit output: i, k
      {"ij->ji", {a}, {3, 2}, {1, 4, 2, 5, 3, 6}},
      {"ji", {a}, {3, 2}, {1, 4, 2, 5, 3, 6}},                    // implicit output sorted: i, j
      {"ij->", {a}, {}, {21}},                                    // sum of everything
      {"ij->j", {a}, {3}, {5, 7, 9}},
      {"ii->i", {sq}, {3}, {1, 5, 9}},                            // diagonal
      {"ii", {sq}, {}, {15}},                                     // trace (implicit: no label once)
      {"i,i", {Tensor::FromVector<float>({3}, {1, 2, 3}), Tensor::FromVector<float>({3}, {4, 5, 6})}, {}, {32}},
      {"i,j->ij", {Tensor::FromVector<float>({2}, {1, 2}), Tensor::FromVector<float>({3}, {1, 10, 100})}, {2, 3},
       {1, 10, 100, 2, 20, 200}},
      {"ij,jk,kl->il", {a, b, Tensor::FromVector<float>({2, 1}, {1, -1})}, {2, 1}, {-1, -1}},
      {"...ij->...ji", {Tensor::FromVector<float>({2, 1, 2}, {1, 2, 3, 4})}, {2, 2, 1}, {1, 2, 3, 4}},
      {" i j , j k -> i k ", {a, b}, {2, 2}, {4, 5, 10, 11}},     // spaces are ignored
      {"Ab,bA->A", {Tensor::FromVector<float>({2, 2}, {1, 2, 3, 4}), Tensor::FromVector<float>({2, 2}, {1, 2, 3, 4})},
       {2}, {7, 22}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.eq);
    for (Backend p : ::whittle::testing::TestedBackends()) {
      auto r = RunNode(MakeNode("Einsum", static_cast<int>(c.in.size()), 1, Attrs({{"equation", Attribute::String(c.eq)}})),
                       17, c.in, p);
      ASSERT_TRUE(r.ok()) << r.status().message();
      EXPECT_EQ((*r)[0].dims(), c.dims);
      EXPECT_EQ(Values<float>((*r)[0]), c.want);
    }
  }
}

TEST(EinsumReference, AttentionAndBroadcastEllipsisAgainstLoops) {
  // bhqd,bhkd->bhqk against a direct loop.
  const Tensor q = RandomFloat({2, 3, 4, 5}, 1), k = RandomFloat({2, 3, 6, 5}, 2);
  auto r = RunEinsum("bhqd,bhkd->bhqk", {q, k});
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ((*r)[0].dims(), (Dims{2, 3, 4, 6}));
  const float* y = (*r)[0].data<float>();
  for (int64_t bh = 0; bh < 6; ++bh)
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j = 0; j < 6; ++j) {
        double acc = 0;
        for (int64_t d = 0; d < 5; ++d) acc += q.data<float>()[(bh * 4 + i) * 5 + d] * k.data<float>()[(bh * 6 + j) * 5 + d];
        ASSERT_NEAR(y[(bh * 4 + i) * 6 + j], acc, 1e-5);
      }
  // "...ij,...jk->...ik" with batch dims [2, 1] and [3] broadcasting to [2, 3]; equals MatMul.
  const Tensor a = RandomFloat({2, 1, 4, 3}, 3), b = RandomFloat({3, 3, 5}, 4);
  auto e = RunEinsum("...ij,...jk->...ik", {a, b});
  auto m = RunNode(MakeNode("MatMul", 2, 1), 17, {a, b}, Backend::kReference);
  ASSERT_TRUE(e.ok()) << e.status().message();
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_TRUE(TensorsClose((*e)[0], (*m)[0], 1e-5f, 1e-5f));
  // Batch diagonal (test_einsum_batch_diagonal): "...ii->...i".
  const Tensor sq = RandomFloat({3, 4, 4}, 5);
  auto d = RunEinsum("...ii->...i", {sq});
  ASSERT_TRUE(d.ok()) << d.status().message();
  ASSERT_EQ((*d)[0].dims(), (Dims{3, 4}));
  for (int64_t bi = 0; bi < 3; ++bi)
    for (int64_t i = 0; i < 4; ++i) EXPECT_EQ((*d)[0].data<float>()[bi * 4 + i], sq.data<float>()[(bi * 4 + i) * 4 + i]);
}

TEST(EinsumReference, IntegerAndDoubleTypes) {
  auto r = RunEinsum("ij,j->i", {Tensor::FromVector<int64_t>({2, 2}, {1, 2, 3, 4}), Tensor::FromVector<int64_t>({2}, {10, 100})});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Values<int64_t>((*r)[0]), (std::vector<int64_t>{210, 430}));
  r = RunEinsum("ij->i", {Tensor::FromVector<double>({2, 2}, {0.5, 0.25, 1, 2})});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Values<double>((*r)[0]), (std::vector<double>{0.75, 3}));
}

TEST(Einsum, RejectsMalformedEquationsAndShapes) {
  const Tensor a = RandomFloat({2, 3}, 1), b = RandomFloat({3, 4}, 2);
  auto expect_error = [](const std::string& eq, const std::vector<Tensor>& in, const std::string& needle) {
    auto r = RunEinsum(eq, in);
    ASSERT_FALSE(r.ok()) << eq;
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << eq << ": " << r.status().message();
    EXPECT_EQ(r.status().message().find('\n'), std::string::npos) << r.status().message();
  };
  expect_error("ij,jk->i#", {a, b}, "unexpected character '#'");
  expect_error("ij,jk->ik->i", {a, b}, "more than one '->'");
  expect_error("ij,jk->iz", {a, b}, "'z' does not occur");
  expect_error("ij,jk->ii", {a, b}, "'i' is repeated");
  expect_error("ij->ij", {a, b}, "1 input terms but the node has 2 inputs");
  expect_error("i.j->ij", {a}, "'...'");
  expect_error("...i...j->ij", {a}, "more than one '...'");
  expect_error("ijk->i", {a}, "rank 2");
  expect_error("ij,kj->ik", {a, b}, "label 'j'");
  expect_error("...j->j", {a}, "no '...'");
  expect_error("", {a}, "empty");
  auto r = RunNode(MakeNode("Einsum", 1, 1), 17, {a}, Backend::kReference);
  EXPECT_FALSE(r.ok());
  r = RunNode(MakeNode("Einsum", 2, 1, Attrs({{"equation", Attribute::String("ij,jk->ik")}})), 17,
              {a, Tensor::FromVector<int64_t>({3, 1}, {1, 2, 3})}, Backend::kReference);
  EXPECT_FALSE(r.ok());
}

}  // namespace
}  // namespace whittle
