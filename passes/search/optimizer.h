// The search's optimizer: a multiple-choice knapsack over per-layer choices. Each layer takes
// exactly one of its options; an option has a cost (the target's figure: bytes, MACs or measured
// latency — its change from the original, so savings are negative) and a predicted loss (the
// accuracy drop it caused alone, in percentage points). Losses are assumed to add across layers.
// Solve minimizes the total cost with the total predicted loss within a budget: the Lagrangian
// relaxation (each layer minimizes cost + lambda * loss; lambda found by bisection), then a greedy
// pass that spends what budget is left on the upgrades that save most per point of loss.
#pragma once

#include <vector>

namespace whittle::search {

struct Option {
  double cost = 0;  // change of the target's figure (negative: saves)
  double loss = 0;  // predicted drop, >= 0
};

struct Solution {
  std::vector<int> pick;  // option index per layer
  double cost = 0, loss = 0;
};

// layers[i][0] must be the layer left as it is (cost 0, loss 0), so that a solution always
// exists. Options with a cost >= 0 that are not option 0 are never picked.
Solution Solve(const std::vector<std::vector<Option>>& layers, double budget);

}  // namespace whittle::search
