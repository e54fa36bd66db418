// The SVD pass's numerics and rank allocation on their own: full and randomized SVD against
// matrices with a known spectrum, the energy rank, and the greedy allocation's arithmetic.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "passes/svd/linalg.h"
#include "passes/svd/rank_allocation.h"
#include "tests/passes/svd/svd_test_util.h"

namespace whittle {
namespace {

Matrix FromVector(int64_t rows, int64_t cols, const std::vector<float>& v) {
  Matrix m(rows, cols);
  m.data = v;
  return m;
}

double DiffSq(const Matrix& a, const Matrix& b) {
  double d = 0;
  for (size_t i = 0; i < a.data.size(); ++i) d += (static_cast<double>(a.data[i]) - b.data[i]) * (a.data[i] - b.data[i]);
  return d;
}

TEST(SvdLinalg, FullSvdFindsTheKnownSpectrumAndReconstructs) {
  const std::vector<double> spec = testing::GeometricSpectrum(20, 5.0, 0.8);
  const Matrix w = FromVector(30, 20, testing::MatrixWithSpectrum(30, 20, spec, 3));
  SvdResult svd = FullSvd(w);
  ASSERT_EQ(svd.rank(), 20);
  EXPECT_TRUE(svd.complete);
  for (size_t i = 0; i < spec.size(); ++i) EXPECT_NEAR(svd.s[i], spec[i], 1e-5 * spec[0]) << i;
  double total = 0;
  for (double s : spec) total += s * s;
  EXPECT_NEAR(svd.total_energy, total, 1e-5 * total);
  Matrix a, b;
  SplitFactors(svd, 20, &a, &b);
  EXPECT_LT(DiffSq(MatMul(a, b), w), 1e-9 * total);
  // Eckart–Young: the rank-r truncation's squared error is the sum of the discarded sigma^2.
  for (int64_t r : {1, 5, 12}) {
    SplitFactors(svd, r, &a, &b);
    double discarded = 0;
    for (size_t i = static_cast<size_t>(r); i < spec.size(); ++i) discarded += spec[i] * spec[i];
    EXPECT_NEAR(DiffSq(MatMul(a, b), w), discarded, 1e-4 * total) << "rank " << r;
  }
}

TEST(SvdLinalg, SplitFactorsBalancesTheScales) {
  const Matrix w = FromVector(8, 6, testing::MatrixWithSpectrum(8, 6, {9.0, 4.0, 1.0}, 5));
  SvdResult svd = FullSvd(w);
  Matrix a, b;
  SplitFactors(svd, 3, &a, &b);
  for (int64_t j = 0; j < 3; ++j) {  // column j of a and row j of b both have norm sqrt(sigma_j)
    double na = 0, nb = 0;
    for (int64_t i = 0; i < a.rows; ++i) na += a.at(i, j) * a.at(i, j);
    for (int64_t i = 0; i < b.cols; ++i) nb += b.at(j, i) * b.at(j, i);
    EXPECT_NEAR(na, svd.s[static_cast<size_t>(j)], 1e-4);
    EXPECT_NEAR(nb, svd.s[static_cast<size_t>(j)], 1e-4);
  }
}

TEST(SvdLinalg, RandomizedMatchesFullOnLowRankPlusNoise) {
  const int64_t m = 300, n = 200, k = 12;
  std::vector<double> spec = testing::GeometricSpectrum(k, 50.0, 0.85);
  std::vector<float> v = testing::MatrixWithSpectrum(m, n, spec, 11);
  std::mt19937 rng(4);
  std::normal_distribution<float> noise(0.f, 0.01f);
  for (float& x : v) x += noise(rng);
  const Matrix w = FromVector(m, n, v);
  SvdResult full = FullSvd(w);
  SvdResult rnd = RandomizedSvd(w, k, 10, 2, 99);
  ASSERT_EQ(rnd.rank(), k);
  EXPECT_FALSE(rnd.complete);
  EXPECT_NEAR(rnd.total_energy, full.total_energy, 1e-6 * full.total_energy);
  for (int64_t i = 0; i < k; ++i)
    EXPECT_NEAR(rnd.s[static_cast<size_t>(i)], full.s[static_cast<size_t>(i)], 1e-3 * full.s[static_cast<size_t>(i)]) << i;
  // The randomized factors are (almost) as good as the optimal truncation.
  Matrix a, b, fa, fb;
  SplitFactors(rnd, k, &a, &b);
  SplitFactors(full, k, &fa, &fb);
  const double err_rnd = DiffSq(MatMul(a, b), w), err_full = DiffSq(MatMul(fa, fb), w);
  EXPECT_LE(err_rnd, err_full * 1.02 + 1e-9);
  // Same seed, same result.
  SvdResult again = RandomizedSvd(w, k, 10, 2, 99);
  EXPECT_EQ(again.s, rnd.s);
}

TEST(SvdLinalg, RankForEnergy) {
  SvdResult svd;
  svd.s = {3, 2, 1, 1};  // squares 9, 4, 1, 1 of 15
  svd.total_energy = 15;
  EXPECT_EQ(RankForEnergy(svd, 0.5), 1);  // 9/15 = 0.6
  EXPECT_EQ(RankForEnergy(svd, 0.6), 1);
  EXPECT_EQ(RankForEnergy(svd, 0.61), 2);
  EXPECT_EQ(RankForEnergy(svd, 0.9), 3);  // 14/15 = 0.933
  EXPECT_EQ(RankForEnergy(svd, 1.0), 4);
  svd.total_energy = 30;  // a partial spectrum that holds only half the energy
  EXPECT_FALSE(ReachesEnergy(svd, 0.6));
  EXPECT_TRUE(ReachesEnergy(svd, 0.5));
}

TEST(RankAllocation, TakesRankWhereLossPerMacIsSmallest) {
  // Two layers, 100 MACs each; ranks 1..3 cost 25/50/75 MACs.
  RankCurve robust{100, {1, 2, 3}, {25, 50, 75}, {0.02, 0.01, 0.0}};
  RankCurve fragile{100, {1, 2, 3}, {25, 50, 75}, {0.5, 0.2, 0.1}};
  RankAllocation a = AllocateRanks({robust, fragile}, 60);
  EXPECT_TRUE(a.target_met);
  EXPECT_EQ(a.rank, (std::vector<int64_t>{1, 0}));  // the robust layer alone can give 75
  EXPECT_EQ(a.macs_saved, 75);
  EXPECT_NEAR(a.predicted_loss, 0.02, 1e-12);
  // A bigger target needs the fragile layer too, at its cheapest useful rank.
  a = AllocateRanks({robust, fragile}, 100);
  EXPECT_TRUE(a.target_met);
  EXPECT_EQ(a.rank[0], 1);
  EXPECT_EQ(a.rank[1], 3);
  EXPECT_EQ(a.macs_saved, 100);
  // Unreachable: everything at the lowest rank, reported as not met.
  a = AllocateRanks({robust, fragile}, 190);
  EXPECT_FALSE(a.target_met);
  EXPECT_EQ(a.rank, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(a.macs_saved, 150);
}

TEST(RankAllocation, GivesBackRankAfterOvershooting) {
  // The greedy first takes b's nearly free 20 MACs, then needs a's big step, which alone meets
  // the target: the give-back restores b.
  RankCurve a_curve{100, {1}, {10}, {0.01}};
  RankCurve b_curve{100, {1}, {80}, {0.0001}};
  RankAllocation r = AllocateRanks({a_curve, b_curve}, 90);
  EXPECT_TRUE(r.target_met);
  EXPECT_EQ(r.rank, (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(r.macs_saved, 90);
  EXPECT_NEAR(r.predicted_loss, 0.01, 1e-12);
}

TEST(RankAllocation, SwapsRankBetweenLayersWhenTheGreedyStepWasTooBig) {
  // a's one step saves 90 at a low loss per MAC, so the greedy takes it for a target of 60;
  // b alone could save 60 for less loss in total. Only a swap (raise a, lower b) finds that.
  RankCurve a_curve{100, {1}, {10}, {0.0089}};
  RankCurve b_curve{100, {1, 2}, {30, 40}, {0.0095, 0.006}};
  RankAllocation r = AllocateRanks({a_curve, b_curve}, 60);
  EXPECT_TRUE(r.target_met);
  EXPECT_EQ(r.rank, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(r.macs_saved, 60);
  EXPECT_NEAR(r.predicted_loss, 0.006, 1e-12);
}

TEST(RankAllocation, InterpolatesAndMakesLossMonotone) {
  std::vector<SensitivityPoint> pts = {{8, 0, 0.70}, {24, 0, 0.90}, {40, 0, 0.85}};  // noisy: 40 worse than 24
  std::vector<double> loss = InterpolateLoss({8, 16, 24, 32, 40, 48}, pts, 0.9, 64);
  ASSERT_EQ(loss.size(), 6u);
  EXPECT_NEAR(loss[0], 0.20, 1e-12);
  EXPECT_NEAR(loss[1], 0.10, 1e-12);
  EXPECT_NEAR(loss[5], 0.05 * 16.0 / 24.0, 1e-12);  // between (40, .05) and (64, 0)
  for (size_t i = 1; i < loss.size(); ++i) EXPECT_LE(loss[i], loss[i - 1]);
  EXPECT_NEAR(loss[2], 0.05, 1e-12);  // lifted to the worse higher rank's loss
}

TEST(RankAllocation, PicksCandidatesSpreadOverTheRange) {
  std::vector<int64_t> allowed;
  for (int64_t r = 8; r <= 192; r += 8) allowed.push_back(r);
  std::vector<int64_t> c = PickCandidates(allowed, 8);
  ASSERT_EQ(c.size(), 8u);
  EXPECT_EQ(c.front(), 8);
  EXPECT_EQ(c.back(), 192);
  for (size_t i = 1; i < c.size(); ++i) EXPECT_GT(c[i], c[i - 1]);
  // Geometric: ratios between neighbours stay near (192/8)^(1/7) = 1.57, so the low end is dense.
  EXPECT_EQ(c, (std::vector<int64_t>{8, 16, 24, 32, 48, 80, 120, 192}));
  EXPECT_EQ(PickCandidates({8, 16}, 8), (std::vector<int64_t>{8, 16}));
  // Crowded at the low end: still distinct, ascending, first and last kept.
  EXPECT_EQ(PickCandidates({8, 16, 24, 32, 40}, 4), (std::vector<int64_t>{8, 16, 24, 40}));
}

}  // namespace
}  // namespace whittle
