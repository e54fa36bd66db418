// JSON rendering of a CompressionReport (compress-model --report-json).
#include <cstdio>
#include <cstdlib>

#include "passes/report/report.h"

namespace whittle {
namespace {

// Unmeasured figures are null so that every key is always present.
nlohmann::json OrNull(double v) { return v < 0 ? nlohmann::json(nullptr) : nlohmann::json(v); }
nlohmann::json OrNull(int64_t v) { return v < 0 ? nlohmann::json(nullptr) : nlohmann::json(v); }

// The shortest double that reads back as the same float ("%.9g" round-trips every float).
double FloatAsShortDouble(float f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(f));
  for (int digits = 6; digits < 9; ++digits) {
    char shorter[32];
    std::snprintf(shorter, sizeof shorter, "%.*g", digits, static_cast<double>(f));
    if (std::strtof(shorter, nullptr) == f) return std::strtod(shorter, nullptr);
  }
  return std::strtod(buf, nullptr);
}

nlohmann::json Figures(const ModelFigures& f) {
  return {{"file_bytes", OrNull(f.file_bytes)},   {"params", OrNull(f.params)},
          {"param_bytes", OrNull(f.param_bytes)}, {"macs", OrNull(f.macs)},
          {"accuracy", OrNull(f.accuracy)},       {"latency_p50_ms", OrNull(f.latency_p50_ms)},
          {"throughput", OrNull(f.throughput)}};
}

nlohmann::json Layer(const LayerReport& l) {
  nlohmann::json spectrum = nlohmann::json::array();
  // Singular values are floats; widening them to double would print noise digits.
  for (float s : l.spectrum) spectrum.push_back(FloatAsShortDouble(s));
  nlohmann::json sens = nlohmann::json::array();
  for (const SensitivityPoint& p : l.sensitivity)
    sens.push_back({{"setting", p.setting}, {"compression", p.compression}, {"accuracy", p.accuracy}});
  return {{"node", l.node},
          {"op_type", l.op_type},
          {"action", l.action},
          {"detail", l.detail},
          {"reason", l.reason},
          {"params_before", l.params_before},
          {"params_after", l.params_after},
          {"macs_before", l.macs_before},
          {"macs_after", l.macs_after},
          {"setting", l.setting},
          {"full_setting", l.full_setting},
          {"spectrum", spectrum},
          {"sensitivity", sens}};
}

}  // namespace

nlohmann::json ToJson(const CompressionReport& r) {
  nlohmann::json passes = nlohmann::json::array();
  for (const PassReport& p : r.passes) {
    nlohmann::json layers = nlohmann::json::array();
    for (const LayerReport& l : p.layers) layers.push_back(Layer(l));
    passes.push_back({{"pass", p.pass}, {"config", p.config}, {"seconds", p.seconds}, {"notes", p.notes},
                      {"layers", layers}});
  }
  return {{"input", r.input_path},
          {"output", r.output_path},
          {"eval_data", r.eval_data.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.eval_data)},
          {"eval_samples", r.eval_samples},
          {"calibration_data", r.calibration_data.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.calibration_data)},
          {"calibration_samples", r.calibration_samples},
          {"bench_batch", r.bench_batch > 0 ? nlohmann::json(r.bench_batch) : nlohmann::json(nullptr)},
          {"threads", r.threads},
          {"seconds", r.seconds},
          {"passes", passes},
          {"notes", r.notes},
          {"output_agreement", r.output_max_abs >= 0 ? nlohmann::json{{"cosine", r.output_cosine},
                                                                       {"max_abs", r.output_max_abs}}
                                                     : nlohmann::json(nullptr)},
          {"search", r.search ? SearchJson(*r.search) : nlohmann::json(nullptr)},
          {"summary", {{"before", Figures(r.before)}, {"after", Figures(r.after)}}}};
}

}  // namespace whittle
