// One factorizable layer of the SVD pass: matching (which nodes qualify, and why not), the
// weight as a matrix W [m, n], the cost of the factorized layer as a function of the rank, and
// the rewrite that replaces the node by two standard ops computing A·B ≈ W:
//   Gemm/MatMul  W = op(B) [K, N]                     -> first op K->r, second op r->N (+ bias)
//   Conv channel W [Cout, Cin*kh*kw]                  -> k×k Conv with r filters, 1×1 Conv (+ bias)
//   Conv spatial W[(c,y),(n,x)] [Cin*kh, Cout*kw]     -> kh×1 Conv (r outputs), 1×kw Conv (+ bias)
// The node carrying the final output keeps the original name; the new one is "<name>/svd_u".
#pragma once

#include <cstdint>
#include <string>

#include "lib/ir/graph.h"
#include "passes/svd/linalg.h"

namespace whittle {

enum class LowRankKind { kGemm, kMatMul, kConvChannel, kConvSpatial };

struct LowRankLayer {
  int node = -1;  // index in the graph it was matched in
  std::string name, op_type;
  LowRankKind kind = LowRankKind::kGemm;
  int weight = -1;            // value id of the weight initializer
  int64_t m = 0, n = 0;       // the factorized matrix is [m, n]
  int64_t macs_before = 0;    // per sample, as passes/cost.h counts them
  int64_t params_before = 0;  // the node's constant inputs (weight + bias)
  int64_t macs_per_rank = 0;  // factorized MACs = macs_per_rank * r
  int64_t other_params = 0;   // params that stay (bias); factorized params = (m + n) * r + other_params

  int64_t full_rank() const { return m < n ? m : n; }
  int64_t MacsAfter(int64_t r) const { return macs_per_rank * r; }
  int64_t ParamsAfter(int64_t r) const { return (m + n) * r + other_params; }
  // Largest rank whose factorization still has fewer MACs than the original (0 if none).
  int64_t MaxUsefulRank() const;
  const char* Action() const;  // "svd", "svd-channel", "svd-spatial"
};

// Does node `index` qualify? On success *out describes it; otherwise *reason says why not
// (reason empty: not a layer kind this pass considers at all, e.g. Relu — nothing to report).
bool MatchLowRankLayer(const Graph& g, int index, bool spatial, LowRankLayer* out, std::string* reason);

// W as the [m, n] matrix this layer's kind factorizes.
Matrix LayerMatrix(const Graph& g, const LowRankLayer& layer);

// Replaces the layer's node by the two factor ops (a [m, r], b [r, n]). Only appends nodes and
// values and edits the layer's own node, so indices of other matched layers stay valid; the
// replaced weight is left for Compact() to drop.
void ApplyLowRank(Graph& g, const LowRankLayer& layer, const Matrix& a, const Matrix& b);

// True for weights this pass produced (idempotence: a second run leaves them alone).
bool IsSvdFactorName(const std::string& value_name);

}  // namespace whittle
