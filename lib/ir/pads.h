// Pad's pads for every axis from pads given for some axes only (opset 18's optional axes input),
// shared by Pad's shape inference (lib/ops) and its kernels.
#pragma once

#include <cstdint>
#include <vector>

#include "lib/ir/graph.h"
#include "lib/ir/status.h"

namespace whittle {

// [b_0..b_{r-1}, e_0..e_{r-1}] with pads[i] / pads[i + |axes|] on axes[i] (negative axes count
// from the end) and 0 elsewhere; errors on a length mismatch, an axis out of range or a repeat.
StatusOr<std::vector<int64_t>> PadsForAllAxes(const std::vector<int64_t>& pads, const std::vector<int64_t>& axes,
                                              int64_t rank);

// The pads of Pad node n for every axis of its input, as above, when they are known before it
// runs: the attribute before opset 11, else constant int64 input 1 (with input 3's axes, opset 18,
// constant too). False when they are computed, or invalid, or axes need an input rank not known.
// For the rewrites and passes that reason about a Pad at load.
bool ConstantPads(const Graph& g, const Node& n, std::vector<int64_t>* pads);

}  // namespace whittle
