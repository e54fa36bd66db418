// Text and JSON renderings of the accuracy-aware search's SearchReport (its HTML is in
// search_html.cc).
#include "passes/report/report.h"
#include "passes/report/report_format.h"

namespace whittle {

using report::Fixed;
using report::Grouped;
using report::TextTable;

namespace {

std::string TargetFigure(const SearchReport& s, const SearchPointReport& p) {
  if (s.target == "latency") return p.latency_ms >= 0 ? Fixed(p.latency_ms, 3) + " ms" : "-";
  if (s.target == "macs") return Grouped(p.macs);
  return Grouped(p.param_bytes) + " B";
}

nlohmann::json OrNull(double v) { return v >= 0 ? nlohmann::json(v) : nlohmann::json(nullptr); }

}  // namespace

std::string SearchText(const SearchReport& s) {
  std::string out = "search: --target " + s.target + " --max-drop " + Fixed(s.max_drop, 2) + " pp of " + s.metric +
                    " (original " + Fixed(s.baseline, 2) + "%)";
  if (s.latency_batch > 0) out += ", latency at batch " + std::to_string(s.latency_batch);
  out += "  (" + Fixed(s.seconds, 1) + " s; sensitivities: " + std::to_string(s.measured) + " measured, " +
         std::to_string(s.cached) + " cached, " + Fixed(s.sensitivity_seconds, 1) + " s)\n";
  TextTable t;
  t.Columns({"#", s.target, "drop pp", "predicted", "", "how", "configuration"},
            {TextTable::kRight, TextTable::kRight, TextTable::kRight, TextTable::kRight, TextTable::kLeft,
             TextTable::kLeft, TextTable::kLeft});
  for (size_t i = 0; i < s.points.size(); ++i) {
    const SearchPointReport& p = s.points[i];
    std::string mark = p.chosen ? "chosen" : p.within_budget ? "ok" : "over";
    if (p.pareto) mark += " *";
    if (p.finetuned) mark += " ft";
    t.Row({std::to_string(i + 1), TargetFigure(s, p), Fixed(p.drop, 2), Fixed(p.predicted_drop, 2), mark, p.how,
           p.config});
  }
  out += t.Render("  ");
  out += "  (* on the Pareto frontier of " + s.target + " vs drop; ft: fine-tuned before evaluation)\n";
  TextTable l;
  l.Columns({"layer", "op", "choice", "predicted drop", "cost", "options"},
            {TextTable::kLeft, TextTable::kLeft, TextTable::kLeft, TextTable::kRight, TextTable::kRight,
             TextTable::kRight});
  for (const SearchLayerReport& r : s.layers)
    l.Row({r.node, r.op_type, r.choice, Fixed(r.predicted_drop, 2), s.target == "latency" ? Fixed(r.cost, 3) + " ms"
                                                                                           : Grouped(static_cast<int64_t>(r.cost)),
           std::to_string(r.options)});
  out += "chosen per layer:\n" + l.Render("  ");
  for (const std::string& n : s.notes) out += "  note: " + n + "\n";
  return out;
}

nlohmann::json SearchJson(const SearchReport& s) {
  nlohmann::json points = nlohmann::json::array();
  for (const SearchPointReport& p : s.points)
    points.push_back({{"how", p.how},
                      {"config", p.config},
                      {"predicted_drop", p.predicted_drop},
                      {"drop", p.drop},
                      {"param_bytes", p.param_bytes},
                      {"macs", p.macs},
                      {"latency_ms", OrNull(p.latency_ms)},
                      {"within_budget", p.within_budget},
                      {"pareto", p.pareto},
                      {"chosen", p.chosen},
                      {"finetuned", p.finetuned}});
  nlohmann::json layers = nlohmann::json::array();
  for (const SearchLayerReport& l : s.layers)
    layers.push_back({{"node", l.node},
                      {"op_type", l.op_type},
                      {"choice", l.choice},
                      {"predicted_drop", l.predicted_drop},
                      {"cost", l.cost},
                      {"options", l.options}});
  return {{"target", s.target},
          {"metric", s.metric},
          {"max_drop", s.max_drop},
          {"baseline", s.baseline},
          {"sensitivity_cache", s.cache_path.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.cache_path)},
          {"measured", s.measured},
          {"cached", s.cached},
          {"sensitivity_seconds", s.sensitivity_seconds},
          {"seconds", s.seconds},
          {"latency_batch", s.latency_batch > 0 ? nlohmann::json(s.latency_batch) : nlohmann::json(nullptr)},
          {"points", points},
          {"layers", layers},
          {"notes", s.notes}};
}

}  // namespace whittle
