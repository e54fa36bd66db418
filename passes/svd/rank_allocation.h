// Rank allocation for `--svd ratio=R` (AIMET's greedy idea): every eligible layer has a curve
// of predicted accuracy loss against MACs at its allowed ranks, built from per-layer
// sensitivity measurements (that layer alone factorized, the rest of the model intact). Losses
// are assumed to add across layers. Greedily lower the rank where the loss per MAC saved is
// smallest until the MAC target is met, then improve locally: give back rank where the target
// still holds, and swap rank between two layers when that lowers the predicted loss.
// Pure arithmetic: no graph, no data, so it is tested on its own.
#pragma once

#include <cstdint>
#include <vector>

#include "passes/pass.h"

namespace whittle {

struct RankCurve {
  int64_t macs_full = 0;        // MACs of the layer left alone
  std::vector<int64_t> ranks;   // allowed ranks, ascending; every one has fewer MACs than macs_full
  std::vector<int64_t> macs;    // MACs at each rank
  std::vector<double> loss;     // predicted accuracy loss at each rank (non-increasing in rank)
};

struct RankAllocation {
  std::vector<int64_t> rank;  // per layer; 0 = left alone
  int64_t macs_saved = 0;
  double predicted_loss = 0;
  bool target_met = false;
};

// Chooses ranks so that the MACs saved reach `macs_to_remove` with little predicted loss
// (greedy + local improvement, not a guaranteed optimum); when even the lowest ranks fall
// short, all layers get their lowest rank.
RankAllocation AllocateRanks(const std::vector<RankCurve>& layers, int64_t macs_to_remove);

// Predicted loss at each of `ranks` from measured points (rank, accuracy): linear interpolation
// in rank, with (full_rank, baseline) as the lossless end (an exact factorization), then made
// non-increasing in rank so that measurement noise never rewards a smaller rank.
std::vector<double> InterpolateLoss(const std::vector<int64_t>& ranks, const std::vector<SensitivityPoint>& points,
                                    double baseline, int64_t full_rank);

// Up to `count` ranks from `allowed` (ascending) to measure, always including the first and the
// last, spread geometrically in between (denser at low rank, where accuracy changes fastest).
std::vector<int64_t> PickCandidates(const std::vector<int64_t>& allowed, int64_t count);

}  // namespace whittle
