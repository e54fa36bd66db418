// The rewrite half of the pruning pass: given the channel analysis and which units each group
// keeps, builds new, physically smaller initializers for every producer (output columns/filters),
// consumer (input rows/channels), BatchNormalization/InstanceNormalization, depthwise Conv (and its
// group attribute) and elementwise constant, and optionally folds the removed units' mean output
// into the consumers' biases. Existing initializer tensors are never written; shapes of computed
// values are left for the caller to re-infer.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "lib/ir/graph.h"
#include "passes/prune/channel_groups.h"

namespace whittle::prune {

struct PrunePlan {
  std::map<int, std::vector<bool>> keep;  // group root -> kept units; absent roots keep all
  // Consumed value id -> mean of each position along its channel axis on calibration data. When
  // present, a consumer's bias absorbs W[:, removed] * mean[removed] (bias compensation).
  std::map<int, std::vector<double>> value_means;
};

// Rewrites g in place. Returns notes for the report (e.g. compensation that could not be done).
StatusOr<std::vector<std::string>> ApplyPrune(Graph& g, const ChannelAnalysis& a, const PrunePlan& plan);

// Copy of t keeping only the given indices along axis (any dtype).
Tensor SliceAxis(const Tensor& t, int axis, const std::vector<int64_t>& keep);

}  // namespace whittle::prune
