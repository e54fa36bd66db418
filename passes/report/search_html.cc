// HTML of the accuracy-aware search's SearchReport (compress-model --target --report): one card
// with what was searched, KPI boxes, the scatter chart of every configuration with the Pareto
// frontier (svg_chart.h ParetoSvg), the table of configurations, the chosen per-layer choices and
// the notes. Every string from the search (configs, node names, notes) is escaped.
#include <cmath>

#include "passes/report/report.h"
#include "passes/report/report_format.h"
#include "passes/report/svg_chart.h"

namespace whittle {

using report::TdHtml;
using report::NodeCellHtml;
using report::KpiHtml;
using report::Fixed;
using report::Grouped;
using report::HtmlEscape;

namespace {

std::string Tag(const std::string& cls, const std::string& text) {
  return "<span class=\"tag " + cls + "\">" + HtmlEscape(text) + "</span>";
}

std::string Goal(const std::string& target) {
  if (target == "latency") return "the lowest latency";
  if (target == "macs") return "the fewest MACs per sample";
  return "the smallest parameter bytes";
}

// The sentence under the heading: what was asked, the original's score, time and the cache.
std::string Intro(const SearchReport& s) {
  std::string h = "<p class=\"sub\">Per-layer compression choices searched for <strong>" + Goal(s.target) +
                  "</strong> with a measured drop of at most <strong>" + Fixed(s.max_drop, 2) + " pp</strong> of <strong>" +
                  HtmlEscape(s.metric) + "</strong>";
  h += s.baseline >= 0 ? " from the original's <strong>" + Fixed(s.baseline, 2) + "%</strong>" : " (original not scored)";
  if (s.target == "latency" && s.latency_batch > 0) h += ", latency measured at batch " + std::to_string(s.latency_batch);
  h += ". " + std::to_string(s.points.size()) + " configuration" + (s.points.size() == 1 ? "" : "s") +
       " evaluated in " + Fixed(s.seconds, 1) + " s; sensitivities: <strong>" + Grouped(s.measured) +
       "</strong> measured, <strong>" + Grouped(s.cached) + "</strong> taken from ";
  h += s.cache_path.empty() ? std::string("a cache (none given)") : "the cache <code>" + HtmlEscape(s.cache_path) + "</code>";
  return h + " (" + Fixed(s.sensitivity_seconds, 1) + " s).</p>";
}

std::string Kpis(const SearchReport& s) {
  const SearchPointReport* chosen = nullptr;
  size_t within = 0, pareto = 0;
  for (size_t i = 0; i < s.points.size(); ++i) {
    if (s.points[i].chosen && !chosen) chosen = &s.points[i];
    within += s.points[i].within_budget;
    pareto += s.points[i].pareto;
  }
  std::string h;
  if (chosen) {
    const size_t index = static_cast<size_t>(chosen - s.points.data()) + 1;
    h += KpiHtml("Chosen", HtmlEscape(report::SearchFigureText(s, *chosen)), "good", "configuration #" + std::to_string(index));
    h += KpiHtml("Measured drop", Fixed(chosen->drop, 2) + " pp", chosen->drop <= s.max_drop + 1e-9 ? "good" : "bad",
             "budget " + Fixed(s.max_drop, 2) + " pp · predicted " + Fixed(chosen->predicted_drop, 2) + " pp");
  } else {
    h += KpiHtml("Chosen", "none", "bad", "no configuration within the budget");
  }
  h += KpiHtml("Configurations", std::to_string(s.points.size()), "",
           std::to_string(within) + " within budget · " + std::to_string(pareto) + " on the frontier");
  h += KpiHtml("Sensitivities", Grouped(s.measured + s.cached), "",
           Grouped(s.measured) + " measured · " + Grouped(s.cached) + " cached");
  return "<div class=\"kpis\">" + h + "</div>";
}

std::string FigureHeader(const std::string& target) {
  if (target == "latency") return "Latency";
  if (target == "macs") return "MACs / sample";
  return "Param bytes";
}

std::string PointsTable(const SearchReport& s) {
  if (s.points.empty()) return "<p class=\"empty\">No configuration was evaluated.</p>";
  std::string rows;
  for (size_t i = 0; i < s.points.size(); ++i) {
    const SearchPointReport& p = s.points[i];
    std::string tags = p.within_budget ? Tag("ok", "within budget") : Tag("over", "over budget");
    if (p.chosen) tags += " " + Tag("chosen", "chosen");
    if (p.pareto) tags += " " + Tag("pareto", "Pareto");
    if (p.finetuned) tags += " " + Tag("ft", "fine-tuned");
    std::string figure = HtmlEscape(report::SearchFigureText(s, p));
    if (s.target != "latency" && s.target != "macs" && p.param_bytes >= 0)
      figure = "<span title=\"" + Grouped(p.param_bytes) + " B\">" + figure + "</span>";
    rows += std::string("<tr") + (p.chosen ? " class=\"chosen\"" : "") + ">" + TdHtml("num", std::to_string(i + 1)) +
            TdHtml("num", figure) + TdHtml(std::string("num ") + (p.within_budget ? "good" : "bad"), Fixed(p.drop, 2)) +
            TdHtml("num", Fixed(p.predicted_drop, 2)) + TdHtml("tags", tags) + TdHtml("detail", HtmlEscape(p.how)) +
            TdHtml("config", HtmlEscape(p.config)) + "</tr>";
  }
  return "<table class=\"search-points\"><thead><tr><th class=\"num\">#</th><th class=\"num\">" + FigureHeader(s.target) +
         "</th><th class=\"num\">Drop pp</th><th class=\"num\">Predicted pp</th><th></th><th>How</th>"
         "<th>Configuration</th></tr></thead><tbody>" +
         rows + "</tbody></table>";
}

// A layer's change of the target's figure: negative is a saving.
std::string CostText(const std::string& target, double cost) {
  if (target == "latency") return (cost > 0 ? "+" : "") + Fixed(cost, 3) + " ms";
  const int64_t v = std::llround(cost);
  return (v > 0 ? "+" : "") + Grouped(v) + (target == "macs" ? "" : " B");
}

std::string LayersTable(const SearchReport& s) {
  if (s.layers.empty()) return "<p class=\"empty\">No layer was searched.</p>";
  std::string rows;
  double drop = 0, cost = 0;
  int changed = 0;
  for (const SearchLayerReport& l : s.layers) {
    const bool alone = l.choice == "float";  // search_space.h Choice::Key of the identity choice
    if (!alone) ++changed;
    drop += l.predicted_drop;
    cost += l.cost;
    rows += std::string("<tr") + (alone ? " class=\"skipped\"" : "") + ">" + NodeCellHtml(l.node) +
            TdHtml("", HtmlEscape(l.op_type)) + TdHtml("", Tag(alone ? "skipped" : "choice", alone ? "float (left alone)" : l.choice)) +
            TdHtml("num", Fixed(l.predicted_drop, 2)) + TdHtml(std::string("num") + (l.cost < 0 ? " good" : ""), CostText(s.target, l.cost)) +
            TdHtml("num", std::to_string(l.options)) + "</tr>";
  }
  if (s.layers.size() > 1)
    rows += "<tr class=\"total\"><td colspan=\"3\">Total (" + std::to_string(changed) + " of " +
            std::to_string(s.layers.size()) + " layers compressed)</td>" + TdHtml("num", Fixed(drop, 2)) +
            TdHtml("num", CostText(s.target, cost)) + TdHtml("", "") + "</tr>";
  const std::string unit = s.target == "latency" ? "ms" : s.target == "macs" ? "MACs" : "bytes";
  return "<table class=\"search-layers\"><thead><tr><th>Layer</th><th>Op</th><th>Choice</th>"
         "<th class=\"num\">Predicted drop pp</th><th class=\"num\">Cost (Δ " + unit +
         ")</th><th class=\"num\">Options</th></tr></thead><tbody>" + rows + "</tbody></table>";
}

}  // namespace

std::string SearchHtml(const SearchReport& s) {
  std::string h = "<section class=\"card search\"><h2>Accuracy-aware search <code>--target " + HtmlEscape(s.target) +
                  " --max-drop " + Fixed(s.max_drop, 2) + "</code> <span class=\"meta\">" + Fixed(s.seconds, 1) +
                  " s</span></h2>";
  h += Intro(s) + Kpis(s);
  const std::string svg = report::ParetoSvg(s);
  if (!svg.empty()) {
    size_t unplotted = 0;
    for (const SearchPointReport& p : s.points)
      if (report::SearchFigureText(s, p) == "-" || !std::isfinite(p.drop)) ++unplotted;
    h += "<h3>Measured drop vs. " + HtmlEscape(s.target) + " of every configuration</h3><figure>" + svg;
    if (unplotted > 0)
      h += "<figcaption>" + std::to_string(unplotted) + " configuration" + (unplotted == 1 ? "" : "s") +
           " without a measured figure not plotted.</figcaption>";
    h += "</figure>";
  }
  h += "<h3>Configurations evaluated</h3>" + PointsTable(s);
  h += "<h3>Chosen per layer</h3>" + LayersTable(s);
  if (!s.notes.empty()) {
    h += "<h3>Notes</h3><ul class=\"notes\">";
    for (const std::string& n : s.notes) h += "<li>" + HtmlEscape(n) + "</li>";
    h += "</ul>";
  }
  return h + "</section>\n";
}

}  // namespace whittle
