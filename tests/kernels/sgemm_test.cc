#include "kernels/cpu/sgemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <thread>
#include <vector>

namespace whittle {
namespace {

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// Naive row-major reference in double.
void Naive(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
           const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double a = ta ? A[k * lda + i] : A[i * lda + k];
        const double b = tb ? B[j * ldb + k] : B[k * ldb + j];
        acc += a * b;
      }
      const double c = beta == 0.f ? 0.0 : beta * static_cast<double>(C[i * ldc + j]);
      C[i * ldc + j] = static_cast<float>(alpha * acc + c);
    }
}

struct Case {
  int64_t M, N, K;
  float alpha, beta;
};

class SgemmTest : public ::testing::TestWithParam<GemmBackend> {};

TEST_P(SgemmTest, MatchesNaiveForAllTransposesStridesAndScales) {
  const Case cases[] = {{1, 256, 78, 1.f, 0.f}, {7, 5, 3, 0.5f, 1.f}, {33, 17, 65, 1.f, 0.25f},
                        {64, 10, 128, -2.f, 0.f}, {16, 100, 9, 1.f, 1.f}, {5, 1, 40, 1.f, 0.f}};
  uint32_t seed = 1;
  for (const Case& c : cases) {
    for (int ta = 0; ta < 2; ++ta) {
      for (int tb = 0; tb < 2; ++tb) {
        // Padded leading dims make sure strides are honoured.
        const int64_t lda = (ta ? c.M : c.K) + 3, ldb = (tb ? c.K : c.N) + 2, ldc = c.N + 5;
        const auto a = Random(static_cast<size_t>((ta ? c.K : c.M) * lda), seed++);
        const auto b = Random(static_cast<size_t>((tb ? c.N : c.K) * ldb), seed++);
        auto want = Random(static_cast<size_t>(c.M * ldc), seed++);
        auto got = want;
        if (c.beta == 0.f)  // beta == 0 must not read C
          for (int64_t i = 0; i < c.M; ++i)
            for (int64_t j = 0; j < c.N; ++j) got[static_cast<size_t>(i * ldc + j)] = std::numeric_limits<float>::quiet_NaN();
        Naive(ta, tb, c.M, c.N, c.K, c.alpha, a.data(), lda, b.data(), ldb, c.beta, want.data(), ldc);
        SgemmWith(GetParam(), ta, tb, c.M, c.N, c.K, c.alpha, a.data(), lda, b.data(), ldb, c.beta, got.data(), ldc, 2);
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_NEAR(got[i], want[i], 1e-4f * (1.f + std::fabs(want[i])))
              << "M=" << c.M << " N=" << c.N << " K=" << c.K << " ta=" << ta << " tb=" << tb << " at " << i;
      }
    }
  }
}

TEST_P(SgemmTest, ZeroKScalesC) {
  std::vector<float> c = {1.f, 2.f, 3.f, 4.f};
  SgemmWith(GetParam(), false, false, 2, 2, 0, 1.f, nullptr, 1, nullptr, 2, 0.5f, c.data(), 2, 1);
  EXPECT_EQ(c, (std::vector<float>{0.5f, 1.f, 1.5f, 2.f}));
  std::vector<float> n(4, std::numeric_limits<float>::quiet_NaN());
  SgemmWith(GetParam(), false, false, 2, 2, 0, 1.f, nullptr, 1, nullptr, 2, 0.f, n.data(), 2, 1);
  EXPECT_EQ(n, (std::vector<float>(4, 0.f)));
}

TEST_P(SgemmTest, HandComputed) {
  // [1 2; 3 4] x [5 6; 7 8] = [19 22; 43 50]
  const float a[] = {1, 2, 3, 4}, b[] = {5, 6, 7, 8};
  float c[4];
  SgemmWith(GetParam(), false, false, 2, 2, 2, 1.f, a, 2, b, 2, 0.f, c, 2, 1);
  EXPECT_FLOAT_EQ(c[0], 19);
  EXPECT_FLOAT_EQ(c[1], 22);
  EXPECT_FLOAT_EQ(c[2], 43);
  EXPECT_FLOAT_EQ(c[3], 50);
  // A^T x B: [1 3; 2 4] x [5 6; 7 8] = [26 30; 38 44]
  SgemmWith(GetParam(), true, false, 2, 2, 2, 1.f, a, 2, b, 2, 0.f, c, 2, 1);
  EXPECT_FLOAT_EQ(c[0], 26);
  EXPECT_FLOAT_EQ(c[3], 44);
}

TEST_P(SgemmTest, ConcurrentCallersGetTheirOwnResults) {
  const int64_t M = 48, N = 96, K = 80;
  constexpr int kThreads = 8;
  std::vector<std::vector<float>> as, bs, outs(kThreads), wants(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    as.push_back(Random(static_cast<size_t>(M * K), 100 + t));
    bs.push_back(Random(static_cast<size_t>(K * N), 200 + t));
    wants[t].assign(static_cast<size_t>(M * N), 0.f);
    Naive(false, false, M, N, K, 1.f, as[t].data(), K, bs[t].data(), N, 0.f, wants[t].data(), N);
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      outs[t].assign(static_cast<size_t>(M * N), 0.f);
      for (int rep = 0; rep < 5; ++rep)
        SgemmWith(GetParam(), false, false, M, N, K, 1.f, as[t].data(), K, bs[t].data(), N, 0.f, outs[t].data(), N, 2);
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t)
    for (size_t i = 0; i < outs[t].size(); ++i) ASSERT_NEAR(outs[t][i], wants[t][i], 1e-4f) << "thread " << t;
}

INSTANTIATE_TEST_SUITE_P(Backends, SgemmTest, ::testing::Values(GemmBackend::kEigen, GemmBackend::kOneDnn, GemmBackend::kAuto),
                         [](const ::testing::TestParamInfo<GemmBackend>& i) {
                           return std::string(GemmBackendName(i.param));
                         });

TEST(SgemmDefault, IsAKnownBackendAndSgemmUsesIt) {
  const GemmBackend b = DefaultGemmBackend();
  EXPECT_TRUE(b == GemmBackend::kEigen || b == GemmBackend::kOneDnn || b == GemmBackend::kAuto);
  EXPECT_EQ(AutoGemmBackend(1, 256, 1), GemmBackend::kEigen);
  EXPECT_EQ(AutoGemmBackend(64, 256, 1), GemmBackend::kOneDnn);
  EXPECT_EQ(AutoGemmBackend(1, 256, 2), GemmBackend::kOneDnn);
  const float a[] = {2, 3}, x[] = {4, 5};
  float c = -1.f;
  Sgemm(false, false, 1, 1, 2, 1.f, a, 2, x, 1, 0.f, &c, 1, 1);
  EXPECT_FLOAT_EQ(c, 23.f);
}

}  // namespace
}  // namespace whittle
