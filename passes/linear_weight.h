// The weight a matrix-product layer multiplies by, as the weight-rewriting passes (--cluster,
// --circulant, --binarize) need it: W [n, k] (output n, input k) read out of a Gemm (transA 0,
// alpha and beta 1, either transB) or a MatMul whose right operand is a constant float32 matrix,
// with the layer's bias when it has a constant float32 [N] or [1, N] one. A pass that also takes
// Conv layers fills the same struct for them.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "lib/ir/graph.h"
#include "passes/layer_selection.h"
#include "passes/pass.h"
#include "passes/pass_options.h"

namespace whittle {

struct WeightMatch {
  int node = -1;
  int64_t n = 0, k = 0;
  std::vector<float> w;  // [n, k]
  int bias = -1;         // a float32 value of n elements, or -1
  bool conv = false;     // set by passes that match Conv layers themselves
};

// Node `index` as a Gemm/MatMul weight. false with *reason empty: not a Gemm/MatMul at all;
// false with a reason: one that does not qualify (the reason goes into the pass's report).
bool MatchGemmWeight(const Graph& g, int index, WeightMatch* m, std::string* reason);

// The bias at input `slot` of node `index` when it is a constant float32 of m->n elements ([N], or
// [1, N] when allow_row): sets m->bias; an absent input is fine. false with *reason otherwise.
bool MatchBias(const Graph& g, int index, size_t slot, bool allow_row, WeightMatch* m, std::string* reason);

// The layers a weight-rewriting pass works on: every node `match` accepts, less the ones `select`
// leaves alone (exclude=, layer=NAME:skip=1) and `veto` gives a reason for (or ""); each node left
// alone with a reason goes into rep as skipped, in graph order.
using WeightMatcher = std::function<bool(const Graph&, int, WeightMatch*, std::string*)>;
std::vector<WeightMatch> CollectWeightLayers(const Graph& g, const WeightMatcher& match, const LayerSelection& select,
                                             PassReport* rep,
                                             const std::function<std::string(const Node&)>& veto = nullptr);

// Per-layer settings of a weight-rewriting pass: layer=NAME:<key>=V (lo..hi), beside the skip=1
// that LayerSelection reads (parse it first, with LayerSelection::Skip::kAllowed); any other
// per-layer key is an error naming it.
struct LayerOverrides {
  std::map<std::string, int64_t> value;
  int64_t For(const std::string& node, int64_t def) const {
    auto it = value.find(node);
    return it == value.end() ? def : it->second;
  }
};
StatusOr<LayerOverrides> ParseLayerOverrides(PassOptions& o, const std::string& key, int64_t def, int64_t lo,
                                             int64_t hi);

// params_after of every layer the pass rewrote (LayerReport::action == action), from the node of
// that name in g once the rewrite is done.
void SetParamsAfter(const Graph& g, const std::string& action, PassReport* rep);

// The bias input of the ai.whittle op that replaces layer m (m.bias >= 0): a constant [1, N] row
// flattened to [N] as a new initializer named after the node, else m.bias itself.
int WhittleBiasInput(Graph& g, const WeightMatch& m, const std::string& node_name);

// The end of a pass that rewrote layers into ai.whittle ops (binarize, circulant, cluster): the
// domain imported when any was written, the graph reindexed and compacted (nodes were replaced
// in place, initializers orphaned), then SetParamsAfter.
Status FinishWhittleRewrite(Graph& g, bool rewrote, const std::string& action, PassReport* rep);

}  // namespace whittle
