// The search's multiple-choice knapsack (passes/search/optimizer.h): within budget always, the
// optimum on instances small enough to enumerate, option 0 when nothing fits, and never an option
// that saves nothing.
#include "passes/search/optimizer.h"

#include <gtest/gtest.h>

#include <random>

namespace whittle::search {
namespace {

using Layers = std::vector<std::vector<Option>>;

// The best total cost within the budget, by enumerating every combination.
double BruteForce(const Layers& layers, double budget) {
  double best = 0;
  std::vector<size_t> idx(layers.size(), 0);
  for (;;) {
    double cost = 0, loss = 0;
    for (size_t i = 0; i < layers.size(); ++i) cost += layers[i][idx[i]].cost, loss += layers[i][idx[i]].loss;
    if (loss <= budget && cost < best) best = cost;
    size_t k = 0;
    while (k < layers.size() && ++idx[k] == layers[k].size()) idx[k++] = 0;
    if (k == layers.size()) return best;
  }
}

TEST(SearchOptimizer, PicksTheCheapestCombinationWithinTheBudget) {
  // Layer a: -10 for 1.0 pp or -6 for 0.3 pp; layer b: -8 for 0.6 pp or -3 for 0.1 pp.
  const Layers layers = {{{0, 0}, {-10, 1.0}, {-6, 0.3}}, {{0, 0}, {-8, 0.6}, {-3, 0.1}}};
  Solution s = Solve(layers, 1.0);
  EXPECT_EQ(s.pick, (std::vector<int>{2, 1}));  // -14 for 0.9 beats -10 - 3 = -13 for 1.1 (over) and -13 for 1.1
  EXPECT_DOUBLE_EQ(s.cost, -14);
  EXPECT_NEAR(s.loss, 0.9, 1e-12);
  s = Solve(layers, 2.0);
  EXPECT_EQ(s.pick, (std::vector<int>{1, 1}));
  s = Solve(layers, 0.05);  // nothing fits
  EXPECT_EQ(s.pick, (std::vector<int>{0, 0}));
  EXPECT_EQ(s.cost, 0);
}

TEST(SearchOptimizer, FreeSavingsAreAlwaysTakenAndCostlyOptionsNever) {
  const Layers layers = {{{0, 0}, {-5, 0}}, {{0, 0}, {3, 0}}, {{0, 0}, {0, 0}, {-1, 10}}};
  Solution s = Solve(layers, 0);
  EXPECT_EQ(s.pick, (std::vector<int>{1, 0, 0}));
  EXPECT_DOUBLE_EQ(s.cost, -5);
}

TEST(SearchOptimizer, RandomInstancesStayWithinBudgetAndNearTheOptimum) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> save(1, 100), loss(0, 2);
  double gap_sum = 0;
  int n = 0;
  for (int trial = 0; trial < 200; ++trial) {
    Layers layers(4);
    for (auto& opts : layers) {
      opts.push_back({0, 0});
      const int k = 1 + static_cast<int>(rng() % 4);
      for (int j = 0; j < k; ++j) opts.push_back({-save(rng), loss(rng)});
    }
    const double budget = loss(rng) * 2;
    const Solution s = Solve(layers, budget);
    ASSERT_LE(s.loss, budget + 1e-9) << "trial " << trial;
    double cost = 0, l = 0;
    for (size_t i = 0; i < layers.size(); ++i) cost += layers[i][static_cast<size_t>(s.pick[i])].cost, l += layers[i][static_cast<size_t>(s.pick[i])].loss;
    EXPECT_NEAR(cost, s.cost, 1e-9);
    EXPECT_NEAR(l, s.loss, 1e-9);
    const double opt = BruteForce(layers, budget);
    EXPECT_LE(opt, s.cost + 1e-9);
    if (opt < 0) {
      gap_sum += (s.cost - opt) / -opt;
      ++n;
    }
  }
  // Lagrangian + greedy is not exact, but on average within a few percent of the optimum.
  EXPECT_LT(gap_sum / n, 0.05) << "mean relative gap over " << n << " instances";
}

}  // namespace
}  // namespace whittle::search
