// Importance of each unit of a prunable group, for the pruning pass's criteria. Weight criteria
// (l1/l2) take the norm of a unit's incoming weights (Li et al.), times the scale of a
// BatchNormalization that directly follows the producer (BN rescales units, so raw norms are not
// comparable). Biases do not count: a unit whose weights are all zero outputs a constant, which bias
// compensation removes exactly. The activation criterion and bias compensation use per-position
// statistics of consumed values measured on calibration data.
#pragma once

#include <map>
#include <vector>

#include "lib/data/dataset.h"
#include "lib/ir/graph.h"
#include "passes/pass.h"
#include "passes/prune/channel_groups.h"

namespace whittle::prune {

// One score per output unit of producer p (l2 = false: L1 norm).
std::vector<double> WeightScores(const Graph& g, const Producer& p, bool l2);

// Per value: mean and mean |x| of each position along its channel axis, averaged over samples and
// every other axis.
struct ValueStats {
  std::vector<double> mean, mean_abs;
  std::vector<double> rms;  // sqrt(mean x^2): the feature's norm per sample, for criterion=wanda
};

// Per unit of group `root` (width units): the L1 norm of the rows its consumers (Gemm/MatMul B,
// Conv group 1 input channels) read from it, each row times the RMS of its input position on
// calibration data when stats are given (Wanda's |W|·||x|| summed over the unit's outgoing
// weights: the first-order size of what removing the unit takes from the consumers' outputs; a
// consumer without stats for its input does not vote). Without stats: plain outgoing magnitudes.
std::vector<double> ConsumerRowScores(const Graph& g, const ChannelAnalysis& a, int root, int64_t width,
                                      const std::map<int, ValueStats>* stats);

// Runs the graph on data (fed to its first input) and gathers ValueStats for the given values
// (value id -> channel axis). Reports progress through ctx.
StatusOr<std::map<int, ValueStats>> CollectStats(const Graph& g, const std::map<int, int>& value_axes,
                                                 const Dataset& data, const PassContext& ctx);

}  // namespace whittle::prune
