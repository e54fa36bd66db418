// CompressionReport renderings: JSON carries every field with the right numbers, the text
// tables are aligned, and the HTML is one self-contained document with a spectrum chart per
// factorized layer, the rank marked, and every model-supplied name escaped.
#include <gtest/gtest.h>

#include <cmath>
#include <regex>
#include <string>

#include "passes/pass_manager.h"
#include "passes/report/report.h"
#include "passes/report/report_format.h"
#include "passes/report/svg_chart.h"
#include "tests/util/graph_builder.h"
#include "tests/util/test_util.h"

namespace whittle {
namespace {

size_t Count(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + needle.size())) ++n;
  return n;
}

LayerReport Factorized(const std::string& node, int64_t rank, int64_t full) {
  LayerReport l;
  l.node = node;
  l.op_type = "Gemm";
  l.action = "svd";
  l.detail = "rank " + std::to_string(rank) + " of " + std::to_string(full);
  l.params_before = 784 * 256 + 256;
  l.params_after = rank * (784 + 256) + 256;
  l.macs_before = 784 * 256;
  l.macs_after = rank * (784 + 256);
  l.setting = rank;
  l.full_setting = full;
  for (int64_t i = 0; i < full; ++i) l.spectrum.push_back(100.f * std::pow(0.9f, static_cast<float>(i)));
  for (int64_t r : {full / 4, full / 2, 3 * full / 4}) {
    SensitivityPoint p;
    p.setting = r;
    p.compression = 1.0 - static_cast<double>(r * (784 + 256)) / (784 * 256);
    p.accuracy = 0.88 - 0.05 * p.compression;
    l.sensitivity.push_back(p);
  }
  return l;
}

CompressionReport HandBuilt() {
  CompressionReport r;
  r.input_path = "models/mlp.onnx";
  r.output_path = "/tmp/out.onnx";
  PassReport svd;
  svd.pass = "svd";
  svd.config = "ratio=0.5";
  svd.seconds = 1.25;
  svd.notes = {"ratio target met: 0.50"};
  svd.layers.push_back(Factorized("fc1", 64, 256));
  svd.layers.push_back(Factorized("<b>&\"x", 32, 128));
  LayerReport skipped;
  skipped.node = "fc3";
  skipped.op_type = "Gemm";
  skipped.action = "skipped";
  skipped.reason = "factorization would not reduce MACs";
  skipped.params_before = skipped.params_after = 1290;
  skipped.macs_before = skipped.macs_after = 1280;
  svd.layers.push_back(skipped);
  r.passes.push_back(svd);
  PassReport prune;
  prune.pass = "prune";
  prune.config = "ratio=0.3";
  LayerReport pl;
  pl.node = "fc2";
  pl.op_type = "Gemm";
  pl.action = "prune";
  pl.detail = "kept 88 of 128 units";
  pl.setting = 88;
  pl.full_setting = 128;
  pl.params_before = 32896;
  pl.params_after = 22616;
  pl.macs_before = 32768;
  pl.macs_after = 22528;
  prune.layers.push_back(pl);
  r.passes.push_back(prune);
  r.before = {941167, 235146, 940584, 234752, 0.8833, 2.0, 32000.0};
  r.after = {470000, 117000, 468000, 117376, 0.8790, 1.0, 64000.0};
  r.eval_data = "fashion-mnist:test";
  r.eval_samples = 1000;
  r.calibration_data = "fashion-mnist:train";
  r.calibration_samples = 500;
  r.bench_batch = 64;
  r.threads = 2;
  r.seconds = 3.5;
  return r;
}

TEST(ReportJson, CarriesEveryFieldWithItsNumbers) {
  const CompressionReport r = HandBuilt();
  // Through text and back, as a reader of the file sees it.
  const nlohmann::json j = nlohmann::json::parse(ToJson(r).dump());
  EXPECT_EQ(j["input"], "models/mlp.onnx");
  EXPECT_EQ(j["output"], "/tmp/out.onnx");
  EXPECT_EQ(j["eval_data"], "fashion-mnist:test");
  EXPECT_EQ(j["eval_samples"], 1000);
  EXPECT_EQ(j["calibration_samples"], 500);
  EXPECT_EQ(j["bench_batch"], 64);
  EXPECT_EQ(j["threads"], 2);
  ASSERT_EQ(j["passes"].size(), 2u);
  const auto& svd = j["passes"][0];
  EXPECT_EQ(svd["pass"], "svd");
  EXPECT_EQ(svd["config"], "ratio=0.5");
  EXPECT_DOUBLE_EQ(svd["seconds"].get<double>(), 1.25);
  EXPECT_EQ(svd["notes"][0], "ratio target met: 0.50");
  ASSERT_EQ(svd["layers"].size(), 3u);
  const auto& fc1 = svd["layers"][0];
  for (const char* key : {"node", "op_type", "action", "detail", "reason", "params_before", "params_after", "macs_before",
                          "macs_after", "setting", "full_setting", "spectrum", "sensitivity"})
    EXPECT_TRUE(fc1.contains(key)) << key;
  EXPECT_EQ(fc1["node"], "fc1");
  EXPECT_EQ(fc1["macs_before"].get<int64_t>(), 784 * 256);
  EXPECT_EQ(fc1["macs_after"].get<int64_t>(), 64 * (784 + 256));
  EXPECT_EQ(fc1["params_after"].get<int64_t>(), 64 * (784 + 256) + 256);
  EXPECT_EQ(fc1["setting"].get<int64_t>(), 64);
  EXPECT_EQ(fc1["full_setting"].get<int64_t>(), 256);
  ASSERT_EQ(fc1["spectrum"].size(), 256u);
  // Floats come back as the same float.
  EXPECT_EQ(fc1["spectrum"][5].get<float>(), r.passes[0].layers[0].spectrum[5]);
  ASSERT_EQ(fc1["sensitivity"].size(), 3u);
  EXPECT_EQ(fc1["sensitivity"][1]["setting"].get<int64_t>(), 128);
  EXPECT_DOUBLE_EQ(fc1["sensitivity"][1]["accuracy"].get<double>(), r.passes[0].layers[0].sensitivity[1].accuracy);
  EXPECT_EQ(svd["layers"][1]["node"], "<b>&\"x");  // JSON keeps names verbatim
  EXPECT_EQ(svd["layers"][2]["reason"], "factorization would not reduce MACs");
  EXPECT_EQ(j["passes"][1]["layers"][0]["detail"], "kept 88 of 128 units");
  const auto& before = j["summary"]["before"];
  const auto& after = j["summary"]["after"];
  EXPECT_EQ(before["file_bytes"].get<int64_t>(), 941167);
  EXPECT_EQ(after["file_bytes"].get<int64_t>(), 470000);
  EXPECT_EQ(before["macs"].get<int64_t>(), 234752);
  EXPECT_EQ(after["params"].get<int64_t>(), 117000);
  EXPECT_DOUBLE_EQ(before["accuracy"].get<double>(), 0.8833);
  EXPECT_DOUBLE_EQ(after["latency_p50_ms"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(after["throughput"].get<double>(), 64000.0);
}

TEST(ReportJson, UnmeasuredFiguresAreNull) {
  CompressionReport r = HandBuilt();
  r.before.accuracy = r.after.accuracy = -1;
  r.before.latency_p50_ms = r.after.latency_p50_ms = -1;
  r.bench_batch = 0;
  r.eval_data.clear();
  const nlohmann::json j = ToJson(r);
  EXPECT_TRUE(j["summary"]["before"]["accuracy"].is_null());
  EXPECT_TRUE(j["summary"]["after"]["latency_p50_ms"].is_null());
  EXPECT_TRUE(j["bench_batch"].is_null());
  EXPECT_TRUE(j["eval_data"].is_null());
  EXPECT_FALSE(j["summary"]["after"]["macs"].is_null());
  // And the text summary leaves those rows out.
  const std::string text = SummaryText(r);
  EXPECT_EQ(text.find("accuracy"), std::string::npos);
  EXPECT_EQ(text.find("latency"), std::string::npos);
  EXPECT_NE(text.find("MACs/sample"), std::string::npos);
}

TEST(ReportText, TablesAreAlignedAndComplete) {
  const std::string text = ToText(HandBuilt());
  // Pass order, rewritten and skipped layers with the reason, notes, summary figures.
  const size_t svd = text.find("pass 1: svd ratio=0.5"), prune = text.find("pass 2: prune ratio=0.3");
  ASSERT_NE(svd, std::string::npos) << text;
  ASSERT_NE(prune, std::string::npos) << text;
  EXPECT_LT(svd, prune);
  EXPECT_NE(text.find("factorization would not reduce MACs"), std::string::npos);
  EXPECT_NE(text.find("note: ratio target met: 0.50"), std::string::npos);
  EXPECT_NE(text.find("64/256"), std::string::npos);
  EXPECT_NE(text.find("200,704"), std::string::npos);  // fc1 MACs before, grouped
  EXPECT_NE(text.find("-66.8%"), std::string::npos);   // fc1: 1 - 66560/200704
  EXPECT_NE(text.find("-0.43 pp"), std::string::npos);
  EXPECT_NE(text.find("2.00x faster"), std::string::npos);
  EXPECT_NE(text.find("0.50x (-50.1%)"), std::string::npos);  // file bytes 941167 -> 470000
  // Alignment: in the first table every row has its "MACs change" cell ending at the same column.
  std::vector<size_t> ends;
  std::regex pct(R"((-?\d+\.\d%|0\.0%))");
  size_t pos = svd;
  const size_t table_end = prune;
  while (pos < table_end) {
    const size_t eol = text.find('\n', pos);
    const std::string line = text.substr(pos, eol - pos);
    std::smatch m;
    if (std::regex_search(line, m, pct)) ends.push_back(report::DisplayWidth(line.substr(0, m.position(0) + m.length(0))));
    pos = eol + 1;
  }
  ASSERT_GE(ends.size(), 3u) << text;
  for (size_t e : ends) EXPECT_EQ(e, ends[0]) << text;
}

TEST(ReportHtml, OneSelfContainedDocumentWithChartsAndEscapedNames) {
  const CompressionReport r = HandBuilt();
  const std::string html = ToHtml(r);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(Count(html, "<html"), 1u);
  EXPECT_EQ(Count(html, "</html>"), 1u);
  EXPECT_EQ(Count(html, "<body"), 1u);
  // A spectrum chart per factorized layer (fc1 and the oddly named one), one rank marker each,
  // and one sensitivity chart for the svd pass.
  EXPECT_EQ(Count(html, "class=\"chart spectrum\""), 2u);
  EXPECT_EQ(Count(html, "class=\"rank-marker\""), 2u);
  EXPECT_NE(html.find(">rank 64</text>"), std::string::npos);
  EXPECT_NE(html.find(">rank 32</text>"), std::string::npos);
  EXPECT_EQ(Count(html, "class=\"chart sensitivity\""), 1u);
  EXPECT_EQ(Count(html, "<svg"), 3u);
  EXPECT_EQ(Count(html, "<svg"), Count(html, "</svg>"));
  // Names from the model are escaped everywhere they appear.
  EXPECT_EQ(html.find("<b>&\"x"), std::string::npos);
  EXPECT_NE(html.find("&lt;b&gt;&amp;&quot;x"), std::string::npos);
  EXPECT_EQ(html.find("<b>"), std::string::npos);
  // No scripts, no network: the only URL is the SVG namespace.
  EXPECT_EQ(html.find("<script"), std::string::npos);
  std::string rest = html;
  const std::string ns = "http://www.w3.org/2000/svg";
  for (size_t p = rest.find(ns); p != std::string::npos; p = rest.find(ns)) rest.erase(p, ns.size());
  EXPECT_EQ(rest.find("http://"), std::string::npos);
  EXPECT_EQ(rest.find("https://"), std::string::npos);
  EXPECT_EQ(rest.find("url("), std::string::npos);
  EXPECT_EQ(rest.find("@import"), std::string::npos);
  // Summary and per-layer figures are on the page.
  EXPECT_NE(html.find("200,704"), std::string::npos);
  EXPECT_NE(html.find("kept 88 of 128 units"), std::string::npos);
  EXPECT_NE(html.find("factorization would not reduce MACs"), std::string::npos);
}

TEST(ReportHtml, SkippedLayersAndNoSensitivityDrawNoMarkerOrCurve) {
  CompressionReport r = HandBuilt();
  for (LayerReport& l : r.passes[0].layers) l.sensitivity.clear();
  r.passes[0].layers[1].action = "skipped";
  r.passes[0].layers[1].reason = "rank would not reduce MACs";
  const std::string html = ToHtml(r);
  EXPECT_EQ(Count(html, "class=\"chart spectrum\""), 2u);  // the spectrum is still shown
  EXPECT_EQ(Count(html, "class=\"rank-marker\""), 1u);     // but only fc1 has a chosen rank
  EXPECT_EQ(Count(html, "class=\"chart sensitivity\""), 0u);
}

TEST(ReportText, SlowerIsCalledSlower) {
  CompressionReport r = HandBuilt();
  r.after.latency_p50_ms = 5.0;  // 2.0 -> 5.0 ms
  EXPECT_NE(SummaryText(r).find("2.50x slower"), std::string::npos) << SummaryText(r);
}

TEST(ReportCharts, NiceTicksCoverTheRange) {
  for (auto [lo, hi] : std::vector<std::pair<double, double>>{{0, 100}, {87.2, 88.9}, {-3, 7}, {1, 256}, {5, 5}}) {
    std::vector<double> t = report::NiceTicks(lo, hi, 6);
    ASSERT_GE(t.size(), 2u);
    EXPECT_LE(t.front(), lo + 1e-9);
    EXPECT_GE(t.back(), hi - 1e-9);
    EXPECT_LE(t.size(), 14u);
  }
  EXPECT_EQ(report::NiceTicks(0, 100, 5), (std::vector<double>{0, 20, 40, 60, 80, 100}));
}

TEST(ReportCharts, SpectrumPointsAreLogScaled) {
  LayerReport l;
  l.node = "m";
  l.action = "svd";
  l.setting = 2;
  l.spectrum = {100.f, 10.f, 1.f};  // equal steps on a log axis
  const std::string svg = report::SpectrumSvg(l);
  std::smatch m;
  const std::regex poly("<polyline points=\"([^\"]*)\" fill=\"none\" stroke=\"#94a3b8\"");
  ASSERT_TRUE(std::regex_search(svg, m, poly)) << svg;
  std::vector<double> ys;
  std::stringstream ss(m[1].str());
  std::string pt;
  while (ss >> pt) ys.push_back(std::stod(pt.substr(pt.find(',') + 1)));
  ASSERT_EQ(ys.size(), 3u);
  EXPECT_NEAR(ys[1] - ys[0], ys[2] - ys[1], 0.11);
  EXPECT_GT(ys[2], ys[0]);  // smaller values lower on the page
  // Energy kept at rank 2: (100^2 + 10^2) / (100^2 + 10^2 + 1).
  EXPECT_NE(svg.find("99.99% energy"), std::string::npos) << svg;
}

// A report filled by the PassManager from a real (tiny) pass renders too.
class TagPass : public Pass {
 public:
  std::string name() const override { return "tag"; }
  StatusOr<PassReport> Run(Graph& g, const PassContext&) override {
    PassReport r;
    r.pass = "tag";
    for (const Node& n : g.nodes()) {
      LayerReport l;
      l.node = n.name;
      l.op_type = n.op_type;
      l.action = "skipped";
      l.reason = "test pass rewrites nothing";
      r.layers.push_back(l);
    }
    return r;
  }
};

TEST(ReportText, FromPassManagerReports) {
  testing::GraphBuilder b;
  b.Input("x", DType::kFloat32, {Dim::Symbol("batch"), 4});
  b.Init("w", testing::RandomFloat({4, 3}, 1));
  b.Op("MatMul", {"x", "w"}, {"y"});
  b.Output("y");
  Graph g = b.Build();
  PassManager pm;
  pm.Add(std::make_unique<TagPass>());
  auto reps = pm.Run(&g, PassContext{});
  ASSERT_TRUE(reps.ok()) << reps.status().message();
  CompressionReport r;
  r.passes = *reps;
  const std::string text = ToText(r);
  EXPECT_NE(text.find("pass 1: tag"), std::string::npos) << text;
  EXPECT_NE(text.find("test pass rewrites nothing"), std::string::npos) << text;
  EXPECT_NE(ToHtml(r).find("test pass rewrites nothing"), std::string::npos);
}

}  // namespace
}  // namespace whittle
