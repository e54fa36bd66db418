// The pass contract: a compression pass is a graph rewrite with an explicit config and a report.
// Run() receives a verified graph with shapes and must leave a graph the PassManager can
// re-infer and Verify(); it matches first, then applies (never edits while iterating), and
// running it twice equals running it once. Everything it did — or chose not to do, with the
// reason — goes into the PassReport that compress-model prints and writes as JSON/HTML.
// Copies of a Graph share initializer buffers: a pass replaces a weight with a new Tensor and
// never writes into an existing one.
#pragma once

#include <cstdint>
#include <array>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lib/data/dataset.h"
#include "lib/ir/graph.h"
#include "lib/ir/status.h"

namespace whittle {

// One point of a per-layer sensitivity curve: the layer alone compressed to `setting`
// (a rank or a kept-unit count) gives `accuracy` on the calibration data.
struct SensitivityPoint {
  int64_t setting = 0;
  double compression = 0;  // fraction of the layer's MACs removed at this setting
  double accuracy = 0;
};

// What a pass did to one layer (node) of the model.
struct LayerReport {
  std::string node;     // node name in the input graph
  std::string op_type;  // op type in the input graph
  std::string action;   // e.g. "svd", "svd-channel", "svd-spatial", "prune", or "skipped"
  std::string detail;   // human summary, e.g. "rank 64 of 256" or "kept 176 of 256 units"
  std::string reason;   // why it was skipped (action == "skipped")
  int64_t params_before = 0, params_after = 0;
  int64_t macs_before = 0, macs_after = 0;  // per sample (batch 1)
  int64_t setting = 0;                      // chosen rank / kept units (0 if n/a)
  int64_t full_setting = 0;                 // full rank / original units
  std::vector<float> spectrum;              // singular values, descending (SVD passes)
  std::vector<SensitivityPoint> sensitivity;
};

struct PassReport {
  std::string pass;    // "svd", "prune", ...
  std::string config;  // the spec as the user wrote it
  std::vector<LayerReport> layers;
  std::vector<std::string> notes;  // pass-level remarks (e.g. "ratio target met: 0.50")
  double seconds = 0;
};

// Progress of long work: (stage description, done, total).
using PassProgressFn = std::function<void(const std::string&, int64_t, int64_t)>;

// Activation ranges that --int8's calibration measured, by key (the calibration method and the
// value's name), for a caller that quantizes the same graph many times with different layers
// (the accuracy-aware search's per-layer sensitivities). Only valid while every run sees the same
// graph up to the int8 pass on the same calibration data: the caller decides when to share one.
struct CalibrationCache {
  std::map<std::string, std::array<float, 5>> ranges;  // min, max, lo, hi, clipped
};

// What a pass may use besides the graph.
struct PassContext {
  const Dataset* calibration = nullptr;  // samples for data-driven criteria; may be null
  int num_threads = 1;                   // for evaluating candidate graphs
  uint64_t seed = 1234;                  // randomized algorithms are reproducible
  PassProgressFn progress;               // may be empty
  // Bytes the calibration statistics of a group of layers may take (second moments, gathered one
  // group per pass over the data); 0: GramBudgetBytes's default for the model.
  int64_t statistics_budget_bytes = 0;
  // Null: --int8 measures every activation range it needs; else it takes the ones measured before
  // from here and adds the ones it measures.
  std::shared_ptr<CalibrationCache> calibration_cache;
  void Progress(const std::string& stage, int64_t done, int64_t total) const {
    if (progress) progress(stage, done, total);
  }
};

class Pass {
 public:
  virtual ~Pass() = default;
  virtual std::string name() const = 0;
  // Rewrites g in place. On error g may be partly edited: the PassManager runs passes on a
  // copy and only hands back the result when every pass succeeded.
  virtual StatusOr<PassReport> Run(Graph& g, const PassContext& ctx) = 0;
};

}  // namespace whittle
