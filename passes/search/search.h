// The accuracy-aware search behind compress-model --target size|latency|macs --max-drop PP: finds
// the smallest (or fastest, or cheapest in MACs) configuration of per-layer compression choices
// (search_space.h) whose drop on the eval data stays within the budget. Steps: every layer's
// choices are measured alone on the calibration data (the score drop, and the target's cost:
// bytes, MACs, or latency measured with the runtime on this machine), cached in a file so that a
// run with another budget skips them; a multiple-choice knapsack (optimizer.h) picks the cheapest
// configuration whose predicted drop fits a budget; that configuration is built and evaluated for
// real (optionally after fine-tuning), and the budget given to the knapsack is moved by bisection
// on the measured drops (backing off when a candidate misses); a greedy repair then reverts the
// riskiest layers of the cheapest miss. The result is always a measured configuration.
#pragma once

#include <functional>
#include <optional>
#include <set>
#include <string>

#include "lib/data/dataset.h"
#include "lib/ir/graph.h"
#include "passes/pass.h"
#include "passes/report/report.h"
#include "passes/search/metric.h"
#include "passes/search/search_space.h"

namespace whittle::search {

enum class Target { kSize, kLatency, kMacs };
StatusOr<Target> ParseTarget(const std::string& name);
const char* TargetName(Target t);

// Where the search tells how far it is.
class SearchObserver {
 public:
  virtual ~SearchObserver() = default;
  virtual void Progress(const std::string& stage, int64_t done, int64_t total, const std::string& detail) {
    (void)stage, (void)done, (void)total, (void)detail;
  }
  virtual void Line(const std::string& text) { (void)text; }
  virtual void Clear() {}
};

struct SearchOptions {
  Target target = Target::kSize;
  double max_drop = 1.0;  // pp
  std::set<std::string> families = {"int8", "int4", "svd", "prune", "cluster"};
  std::optional<Metric> metric;      // default: top1 with labelled eval data, else top1-agreement
  BaseSpecs base;                    // the user's own options per pass ("--int8 calibration=mse")
  const Dataset* calibration = nullptr;  // sensitivities (required)
  const Dataset* eval = nullptr;         // the budget's data (required)
  int threads = 1;
  uint64_t seed = 1234;
  std::string cache_path;  // "" = no cache file
  std::string fingerprint; // what the cached figures depend on (model, data, options)
  int max_evals = 8;       // real evaluations of whole configurations
  int64_t latency_batch = 1;
  // Fine-tunes a candidate before it is evaluated (null: none); key names the configuration.
  std::function<StatusOr<Graph>(const Graph& candidate, const std::string& key)> recover;
  // With recover: the first knapsack budget is this multiple of max_drop (losses measured before
  // fine-tuning overstate what is left after it).
  double recovery = 4.0;
};

struct SearchResult {
  Graph graph;                     // the chosen configuration (fine-tuned with recover)
  std::string key;                 // its configuration's key (recover's)
  std::vector<PassReport> passes;  // what its passes did
  SearchReport report;
};

StatusOr<SearchResult> RunSearch(const Graph& original, const SearchOptions& options, SearchObserver* observer = nullptr);

}  // namespace whittle::search
