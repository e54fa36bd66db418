// The accuracy-aware search's space: the layers it may compress (Conv/Gemm/MatMul with a constant
// weight) and, per layer, the choices it may give each one — a structural change (prune a share of
// its units, or factorize it at a share of its full rank) combined with a storage form (float,
// int8, int4 weight-only, a k-means codebook, binary or block-circulant). A configuration (one
// choice per layer) becomes a graph by running the ordinary passes with per-layer options
// (ApplyConfig): prune, svd, then the storage passes, each told exactly which nodes to touch.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "lib/ir/graph.h"
#include "lib/ir/status.h"
#include "passes/pass.h"

namespace whittle::search {

// Bumped when a choice starts building something else (cached sensitivities then no longer apply).
// 2: "int8w" quantizes by GPTQ (Gemm/MatMul blocks and Conv channels) rather than round-to-nearest.
inline constexpr const char* kSearchSpaceRevision = "2";

// One layer's setting. The default is the layer as it is (float, full size).
struct Choice {
  double prune = 0;     // share of the layer's output units removed (0: none)
  double svd = 0;       // rank as a share of the full rank (0: not factorized)
  // "" float, "int8" (static: weights and activations), "int8w" (weights only),
  // "int4" (weights only), "k16"/"k256" (codebook), "bin", "circ4"/"circ8"/"circ16"
  std::string storage;
  bool identity() const { return prune == 0 && svd == 0 && storage.empty(); }
  // A short stable name: "float", "prune0.5+int8", "svd0.25+k16", ... (the cache's key).
  std::string Key() const;
};

struct SearchLayer {
  std::string node;     // node name in the original graph
  std::string op_type;  // Conv, Gemm or MatMul
  int64_t full_rank = 0;
  bool gemm_like = false;  // Gemm/MatMul with a 2-D constant weight (int4, codebooks, circulant)
};

struct SearchSpace {
  std::vector<SearchLayer> layers;
  std::vector<std::vector<Choice>> choices;  // per layer; choices[i][0] is the identity
  std::vector<std::string> notes;            // layers left out and why
};

// The pass families the search may use, by their compress-model flag names.
const std::vector<std::string>& SearchFamilies();
// Checks and parses "int8,int4,svd" (an unknown name is an error listing the known ones).
StatusOr<std::set<std::string>> ParseFamilies(const std::string& list);

// The layers of g (shapes inferred) and their choices from `families`.
StatusOr<SearchSpace> MakeSearchSpace(const Graph& g, const std::set<std::string>& families);

// A configuration: an index into space.choices[i] per layer.
using Config = std::vector<int>;

// Base options the user gave for a family ("--int8 calibration=percentile:99.99"): they are kept,
// and the search adds the per-layer ones.
using BaseSpecs = std::map<std::string, std::string>;

// Runs the passes that `config` needs on a copy of `original` and returns the result; the
// passes' reports go to *reports when given.
StatusOr<Graph> ApplyConfig(const Graph& original, const SearchSpace& space, const Config& config,
                            const BaseSpecs& base, const PassContext& ctx,
                            std::vector<PassReport>* reports = nullptr);

// "fc1: prune0.5+int8, fc2: int8, ..." (identity layers left out; "float" when all are).
std::string DescribeConfig(const SearchSpace& space, const Config& config);

}  // namespace whittle::search
