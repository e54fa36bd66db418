#include "passes/search/optimizer.h"

#include <algorithm>
#include <cmath>

namespace whittle::search {
namespace {

bool Usable(const std::vector<Option>& opts, size_t j) { return j == 0 || opts[j].cost < 0; }

Solution PickFor(const std::vector<std::vector<Option>>& layers, double lambda) {
  Solution s;
  for (const auto& opts : layers) {
    size_t best = 0;
    double best_v = 0;  // option 0: cost 0, loss 0
    for (size_t j = 1; j < opts.size(); ++j) {
      if (!Usable(opts, j)) continue;
      const double v = opts[j].cost + lambda * opts[j].loss;
      // Ties go to the smaller loss: the same cost for less damage.
      if (v < best_v || (v == best_v && opts[j].loss < opts[best].loss)) best = j, best_v = v;
    }
    s.pick.push_back(static_cast<int>(best));
    s.cost += opts[best].cost;
    s.loss += opts[best].loss;
  }
  return s;
}

// Spends the budget left: repeatedly takes the single-layer change that lowers the cost most per
// point of added loss (free improvements first) while the total stays within the budget.
void Improve(const std::vector<std::vector<Option>>& layers, double budget, Solution* s) {
  for (;;) {
    size_t bi = 0, bj = 0;
    double best_ratio = -1;
    for (size_t i = 0; i < layers.size(); ++i) {
      const Option& cur = layers[i][static_cast<size_t>(s->pick[i])];
      for (size_t j = 0; j < layers[i].size(); ++j) {
        if (!Usable(layers[i], j)) continue;
        const Option& o = layers[i][j];
        const double saved = cur.cost - o.cost, added = o.loss - cur.loss;
        if (saved <= 0 || s->loss + added > budget + 1e-12) continue;
        const double ratio = added <= 0 ? 1e300 * (1 + saved) : saved / added;
        if (ratio > best_ratio) best_ratio = ratio, bi = i, bj = j;
      }
    }
    if (best_ratio < 0) return;
    const Option& cur = layers[bi][static_cast<size_t>(s->pick[bi])];
    const Option& o = layers[bi][bj];
    s->cost += o.cost - cur.cost;
    s->loss += o.loss - cur.loss;
    s->pick[bi] = static_cast<int>(bj);
  }
}

}  // namespace

Solution Solve(const std::vector<std::vector<Option>>& layers, double budget) {
  // lambda = 0 takes every saving regardless of loss; large lambda takes only free savings.
  Solution best = PickFor(layers, 1e12);
  if (best.loss > budget) {  // even the "free" choices overshoot (a negative budget)
    best = Solution{std::vector<int>(layers.size(), 0), 0, 0};
  }
  Solution loose = PickFor(layers, 0);
  if (loose.loss <= budget) {
    best = loose;
  } else {
    double lo = 0, hi = 1;  // lo: over budget; hi: find one within it
    while (PickFor(layers, hi).loss > budget && hi < 1e12) hi *= 4;
    for (int it = 0; it < 100 && hi - lo > 1e-9 * std::max(1.0, hi); ++it) {
      const double mid = 0.5 * (lo + hi);
      Solution s = PickFor(layers, mid);
      if (s.loss <= budget) {
        hi = mid;
        if (s.cost < best.cost || (s.cost == best.cost && s.loss < best.loss)) best = s;
      } else {
        lo = mid;
      }
    }
    Solution s = PickFor(layers, hi);
    if (s.loss <= budget && s.cost < best.cost) best = s;
  }
  Improve(layers, budget, &best);
  return best;
}

}  // namespace whittle::search
