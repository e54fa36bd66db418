// The accuracy-aware search's part of the reports (SearchText, SearchJson, SearchHtml and the
// search card inside ToHtml): every evaluated configuration appears once in each rendering, the
// HTML chart has one marker per point, the budget line and the chosen ring, and text from the
// search (configs, node names, notes) is escaped.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "passes/report/report.h"
#include "passes/report/svg_chart.h"

namespace whittle {
namespace {

size_t Count(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + needle.size())) ++n;
  return n;
}

SearchPointReport Point(const std::string& how, const std::string& config, double predicted, double drop,
                        int64_t bytes, bool within, bool pareto) {
  SearchPointReport p;
  p.how = how;
  p.config = config;
  p.predicted_drop = predicted;
  p.drop = drop;
  p.param_bytes = bytes;
  p.macs = bytes / 4;
  p.latency_ms = static_cast<double>(bytes) / 1e6;
  p.within_budget = within;
  p.pareto = pareto;
  return p;
}

// Five configurations of a 3-layer MLP, budget 0.5 pp: two over it, the third chosen.
SearchReport HandBuilt() {
  SearchReport s;
  s.target = "size";
  s.metric = "top1";
  s.max_drop = 0.5;
  s.baseline = 91.25;
  s.cache_path = "/tmp/sens<cache>.json";
  s.measured = 18;
  s.cached = 6;
  s.sensitivity_seconds = 4.5;
  s.seconds = 12.25;
  s.points.push_back(Point("knapsack, budget 0.5 pp", "/fc1/Gemm: int8, /fc2/Gemm: int8", 0.21, 0.12, 420000, true, true));
  s.points.push_back(Point("knapsack, budget 1.2 pp", "/fc1/Gemm: int4, /fc2/Gemm: int4, /fc3/Gemm: int8", 1.1, 1.85,
                           150000, false, true));
  s.points.push_back(Point("knapsack, budget 0.75 pp", "/fc1/Gemm: prune0.5+int8, /fc2/Gemm: int4", 0.6, 0.44, 230000,
                           true, true));
  s.points.push_back(Point("repair: /fc3/Gemm left alone", "<script>alert(1)</script>: int4", 0.9, 0.95, 260000, false,
                           false));
  s.points.push_back(Point("knapsack, budget 0.3 pp", "/fc1/Gemm: int8", 0.1, 0.15, 610000, true, false));
  s.points[2].chosen = true;
  s.points[2].finetuned = true;
  for (const char* node : {"/fc1/Gemm", "/fc2/Gemm", "/fc3/Gemm"}) {
    SearchLayerReport l;
    l.node = node;
    l.op_type = "Gemm";
    l.options = 7;
    s.layers.push_back(l);
  }
  s.layers[0].choice = "prune0.5+int8";
  s.layers[0].predicted_drop = 0.35;
  s.layers[0].cost = -250000;
  s.layers[1].choice = "int4";
  s.layers[1].predicted_drop = 0.25;
  s.layers[1].cost = -120000;
  s.layers[2].choice = "float";
  s.notes = {"sensitivities of 6 choices came from the cache & were not re-measured"};
  return s;
}

TEST(SearchReportHtml, ChartHasAMarkerPerPointTheBudgetAndTheChosenRing) {
  const SearchReport s = HandBuilt();
  const std::string html = SearchHtml(s);
  EXPECT_EQ(Count(html, "<svg"), 1u);
  EXPECT_EQ(Count(html, "</svg>"), 1u);
  EXPECT_EQ(Count(html, "<circle class=\"pt "), s.points.size());
  EXPECT_EQ(Count(html, "<circle class=\"pt within\""), 3u);
  EXPECT_EQ(Count(html, "<circle class=\"pt over\""), 2u);
  EXPECT_EQ(Count(html, "class=\"budget\""), 1u);
  EXPECT_NE(html.find("budget 0.50 pp"), std::string::npos);
  EXPECT_EQ(Count(html, "class=\"chosen-ring\""), 1u);
  EXPECT_NE(html.find("chosen #3"), std::string::npos);
  EXPECT_EQ(Count(html, "class=\"frontier\""), 1u);
  EXPECT_NE(html.find("parameter bytes (KiB)"), std::string::npos);
  // One tooltip per point, with its index, drop and figure.
  EXPECT_NE(html.find("<title>#2: 146.5 KiB, drop 1.85 pp"), std::string::npos);
  // The configurations table: one row per point, the chosen one marked.
  EXPECT_EQ(Count(html, "<tr class=\"chosen\">"), 1u);
  EXPECT_EQ(Count(html, "over budget</span>"), 2u);
  EXPECT_EQ(Count(html, "fine-tuned</span>"), 1u);
  // Heading, sentence, layers and notes.
  EXPECT_NE(html.find("Accuracy-aware search"), std::string::npos);
  EXPECT_NE(html.find("91.25%"), std::string::npos);
  EXPECT_NE(html.find("sens&lt;cache&gt;.json"), std::string::npos);
  EXPECT_NE(html.find("float (left alone)"), std::string::npos);
  EXPECT_NE(html.find("-250,000 B"), std::string::npos);
  EXPECT_NE(html.find("cache &amp; were not"), std::string::npos);
}

TEST(SearchReportHtml, EscapesConfigsAndNames) {
  SearchReport s = HandBuilt();
  s.layers[0].node = "<script>x</script>";
  const std::string html = SearchHtml(s);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
}

TEST(SearchReportHtml, OtherTargetsAndNoChoice) {
  SearchReport s = HandBuilt();
  s.target = "latency";
  s.latency_batch = 8;
  for (SearchPointReport& p : s.points) p.chosen = false;
  std::string html = SearchHtml(s);
  EXPECT_NE(html.find("latency (ms, batch 8)"), std::string::npos);
  EXPECT_EQ(Count(html, "class=\"chosen-ring\""), 0u);
  EXPECT_NE(html.find("no configuration within the budget"), std::string::npos);
  s.target = "macs";
  html = SearchHtml(s);
  EXPECT_NE(html.find("MACs per sample (thousands)"), std::string::npos);
  // A point without a figure is listed in the table but not plotted.
  s.points[0].macs = -1;
  html = SearchHtml(s);
  EXPECT_EQ(Count(html, "<circle class=\"pt "), s.points.size() - 1);
  EXPECT_NE(html.find("1 configuration without a measured figure not plotted"), std::string::npos);
  // Nothing evaluated: no chart, and the tables say so.
  s.points.clear();
  EXPECT_EQ(report::ParetoSvg(s), "");
  html = SearchHtml(s);
  EXPECT_EQ(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("No configuration was evaluated."), std::string::npos);
}

TEST(SearchReportHtml, ToHtmlContainsTheSearchSection) {
  CompressionReport r;
  r.input_path = "models/mlp.onnx";
  r.output_path = "/tmp/out.onnx";
  EXPECT_EQ(ToHtml(r).find("Accuracy-aware search"), std::string::npos);
  r.search = HandBuilt();
  const std::string html = ToHtml(r);
  EXPECT_EQ(Count(html, "<section class=\"card search\">"), 1u);
  EXPECT_EQ(Count(html, "<circle class=\"pt "), r.search->points.size());
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_NE(html.find("svg.pareto"), std::string::npos);  // its CSS is on the page
  // WHITTLE_SEARCH_HTML=path writes the page for a look in a browser.
  if (const char* out = std::getenv("WHITTLE_SEARCH_HTML")) std::ofstream(out) << html;
}

TEST(SearchReportJson, HasEveryPointWithItsFields) {
  const SearchReport s = HandBuilt();
  const nlohmann::json j = SearchJson(s);
  EXPECT_EQ(j["target"], "size");
  EXPECT_DOUBLE_EQ(j["max_drop"].get<double>(), 0.5);
  EXPECT_EQ(j["sensitivity_cache"], "/tmp/sens<cache>.json");
  ASSERT_EQ(j["points"].size(), s.points.size());
  for (size_t i = 0; i < s.points.size(); ++i) {
    const nlohmann::json& p = j["points"][i];
    for (const char* key : {"how", "config", "predicted_drop", "drop", "param_bytes", "macs", "latency_ms",
                            "within_budget", "pareto", "chosen", "finetuned"})
      EXPECT_TRUE(p.contains(key)) << "point " << i << " lacks " << key;
    EXPECT_EQ(p["config"], s.points[i].config);
    EXPECT_DOUBLE_EQ(p["drop"].get<double>(), s.points[i].drop);
    EXPECT_EQ(p["param_bytes"].get<int64_t>(), s.points[i].param_bytes);
    EXPECT_EQ(p["chosen"].get<bool>(), s.points[i].chosen);
    EXPECT_EQ(p["within_budget"].get<bool>(), s.points[i].within_budget);
  }
  ASSERT_EQ(j["layers"].size(), s.layers.size());
  EXPECT_EQ(j["layers"][0]["choice"], "prune0.5+int8");
  EXPECT_EQ(j["notes"].size(), 1u);
}

TEST(SearchReportText, ListsEveryPoint) {
  const SearchReport s = HandBuilt();
  const std::string text = SearchText(s);
  for (const SearchPointReport& p : s.points) EXPECT_NE(text.find(p.config), std::string::npos) << p.config;
  EXPECT_EQ(Count(text, "chosen"), 2u);  // the chosen point's mark, and "chosen per layer:"
  EXPECT_EQ(Count(text, " over"), 2u);
  for (const SearchLayerReport& l : s.layers) EXPECT_NE(text.find(l.node), std::string::npos);
  EXPECT_NE(text.find("note: sensitivities of 6 choices"), std::string::npos);
}

}  // namespace
}  // namespace whittle
