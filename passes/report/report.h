// CompressionReport: what a compression run did to a model — every pass's PassReport plus
// whole-model figures before and after — and its three renderings: aligned text tables for a
// terminal (ToText), JSON for machines (ToJson) and one self-contained HTML page with inline CSS
// and SVG charts, no scripts and no network references (ToHtml). Renderers only format: the
// caller fills in what it measured, and a figure left at -1 is "not measured" (omitted from the
// tables, null in JSON). Text from the model (node names, specs) is escaped in the HTML.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "passes/pass.h"

namespace whittle {

// Whole-model figures at one end of the run.
struct ModelFigures {
  int64_t file_bytes = -1;  // size of the model file with its external data; -1 = unknown
  int64_t params = -1;      // elements of all initializers (passes/cost.h)
  int64_t param_bytes = -1;
  int64_t macs = -1;            // per sample
  double accuracy = -1;         // top-1 in [0, 1] on the eval data; < 0 = not measured
  double latency_p50_ms = -1;   // median latency at CompressionReport::bench_batch
  double throughput = -1;       // samples per second at bench_batch
};

// One configuration the accuracy-aware search evaluated for real (passes/search).
struct SearchPointReport {
  std::string how;             // how it was found: "knapsack, budget 0.50 pp", "repair", ...
  std::string config;          // the per-layer choices ("/fc1/Gemm: prune0.5+int8, ...")
  double predicted_drop = -1;  // sum of the chosen layers' sensitivities, pp
  double drop = -1;            // measured on the eval data, pp (after fine-tuning when it ran)
  int64_t param_bytes = -1, macs = -1;
  double latency_ms = -1;      // measured at the search's batch (latency target)
  bool within_budget = false, chosen = false, pareto = false, finetuned = false;
};

// One layer's part of the chosen configuration.
struct SearchLayerReport {
  std::string node, op_type, choice;
  double predicted_drop = 0;  // this choice alone, on the calibration data, pp
  double cost = 0;            // this choice's change of the target's figure (bytes, MACs or ms)
  int options = 0;            // choices measured for the layer
};

// What compress-model --target ... --max-drop ... searched and chose.
struct SearchReport {
  std::string target;      // size, latency or macs
  std::string metric;      // top1, top1-agreement, cosine, mse
  double max_drop = 0;     // pp
  double baseline = -1;    // the original's score on the eval data, percent
  std::string cache_path;  // "" = none
  int64_t measured = 0, cached = 0;  // sensitivity entries measured now / taken from the cache
  double sensitivity_seconds = 0, seconds = 0;
  int64_t latency_batch = 0;  // latency target: the batch measured
  std::vector<SearchPointReport> points;  // in the order evaluated
  std::vector<SearchLayerReport> layers;  // the chosen configuration, every searched layer
  std::vector<std::string> notes;
};

struct CompressionReport {
  std::string input_path, output_path;
  std::vector<PassReport> passes;  // in the order they ran
  ModelFigures before, after;
  std::string eval_data;            // data spec of the accuracy figures ("" = none)
  int64_t eval_samples = 0;
  std::string calibration_data;     // data spec the passes calibrated on ("" = none)
  int64_t calibration_samples = 0;
  int64_t bench_batch = 0;          // batch of the latency figures (0 = not benchmarked)
  int threads = 1;
  double seconds = 0;               // wall time of the whole run
  std::vector<std::string> notes;   // run-level remarks (e.g. input dims pinned for the cost model)
  // Unlabelled eval data: the compressed model's float outputs against the original's on it
  // (runtime/evaluate.h CompareOutputs); < 0 = not measured.
  double output_cosine = -1;
  double output_max_abs = -1;
  std::optional<SearchReport> search;  // compress-model --target: what the search tried and chose
};

// The search's part of each rendering (compress-model --target): every configuration evaluated
// (how it was found, predicted and measured drop, size/MACs/latency, within budget, on the Pareto
// frontier, chosen) and the chosen per-layer choices. The HTML section has a scatter chart of the
// target's figure against the drop with the Pareto frontier, the budget line and the chosen point.
std::string SearchText(const SearchReport& s);
nlohmann::json SearchJson(const SearchReport& s);
std::string SearchHtml(const SearchReport& s);

// Aligned tables: one per pass (every layer it rewrote or skipped, with the reason), then the
// before → after summary. UTF-8; ends with a newline.
std::string ToText(const CompressionReport& report);
// The per-pass table alone, and the summary table alone (what ToText concatenates).
std::string PassTableText(const PassReport& pass, int index);
std::string SummaryText(const CompressionReport& report);

// {input, output, eval_data, ..., passes: [{pass, config, seconds, notes, layers: [...]}],
//  summary: {before: {...}, after: {...}}}; every LayerReport field, unmeasured figures null.
nlohmann::json ToJson(const CompressionReport& report);

// One HTML5 document: summary, per-pass layer tables, a singular-value spectrum chart (log y,
// chosen rank marked) per layer that has a spectrum, and an accuracy-vs-compression chart per
// pass whose layers carry sensitivity curves.
std::string ToHtml(const CompressionReport& report);

}  // namespace whittle
