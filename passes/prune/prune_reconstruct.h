// criterion=reconstruction of the pruning pass: channels are chosen, and the consumers' weights
// re-fitted, so that each consumer reproduces its original output on calibration data (channel
// pruning with least-squares reconstruction, as in ThiNet and He et al. 2017). A consumer of a
// group's channels computes y = x·W (+ b) over its input features (Gemm/MatMul: the input's
// positions; Conv: im2col patches, channel × kernel tap). From the features' second moments G
// (one pass over the data; Conv positions sampled), channels are removed one by one, each time the
// one whose removal raises the consumers' output error after an optimal re-fit least (the
// optimal-brain-surgeon identity on the Gram matrix's inverse). Then, layer after layer in topological order, the kept rows and the bias are re-fitted
// by ridge least squares on the inputs the pruned model itself produces, to the original outputs:
// W' = argmin ||X'_S W' + 1·b' − Y||², which also absorbs the removed channels' mean.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "lib/data/dataset.h"
#include "lib/ir/graph.h"
#include "passes/layer_inputs.h"
#include "passes/pass.h"
#include "passes/prune/channel_groups.h"

namespace whittle::prune {

// Consumers of every group's channels that reconstruction can handle (Gemm with transA=0,
// MatMul with a constant 2-D B, 2-D Conv with group 1 and explicit pads), and why the others
// cannot (node -> reason).
struct ReconstructionSetup {
  std::vector<int> consumers;
  std::map<int, std::string> unsupported;
};
ReconstructionSetup FindReconstructableConsumers(const Graph& g, const ChannelAnalysis& a);

// The units of group `root` (width units) to keep (`kept` of them) so that the consumers'
// outputs, re-fitted, change least (greedy backward elimination); consumers without a Gram
// matrix do not vote.
std::vector<bool> SelectByReconstruction(const Graph& g, const ChannelAnalysis& a, int root, int64_t width,
                                         int64_t kept, const std::map<int, InputGram>& grams);

// Re-fits every consumer (of `consumers`) that loses input positions under `keep` (group root ->
// kept units), in topological order: on the inputs the model pruned so far produces, to the
// outputs the original model produced (so errors upstream are corrected rather than compounded),
// by ridge least squares over the kept features and the bias. Writes full-size weight (and 1-D
// bias) initializers with the removed rows zero (the apply step slices them away); consumers that
// lose inputs but are not in `consumers` get their removed rows zeroed only. Returns the
// consumers it re-fitted.
StatusOr<std::vector<int>> RefitConsumers(Graph& g, const ChannelAnalysis& a,
                                          const std::map<int, std::vector<bool>>& keep,
                                          const std::vector<int>& consumers, const Dataset& data,
                                          const PassContext& ctx, int64_t positions_per_image = 64);

}  // namespace whittle::prune
