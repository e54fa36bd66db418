// HTML rendering of a CompressionReport (compress-model --report): one self-contained page,
// inline CSS and SVG, no scripts, fonts or images from anywhere.
#include <cmath>

#include "passes/report/report.h"
#include "passes/report/report_format.h"
#include "passes/report/svg_chart.h"

namespace whittle {

using report::TdHtml;
using report::NodeCellHtml;
using report::KpiHtml;
using report::ChangePercent;
using report::Fixed;
using report::Grouped;
using report::HtmlEscape;

namespace report {

const char* PageCss() {
  static const char kCss[] = R"CSS(
:root { --ink:#111827; --muted:#6b7280; --line:#e5e7eb; --bg:#f6f7f9; --card:#fff; --accent:#2563eb;
        --good:#15803d; --bad:#b91c1c; --warn:#b45309; }
* { box-sizing: border-box; }
body { margin:0; background:var(--bg); color:var(--ink);
       font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
main { max-width: 1180px; margin: 0 auto; padding: 28px 28px 40px; }
header { margin-bottom: 18px; }
.eyebrow { text-transform: uppercase; letter-spacing: .08em; font-size: 11px; color: var(--muted); font-weight: 600; }
h1 { font-size: 24px; margin: 4px 0 6px; font-weight: 650; overflow-wrap: anywhere; }
h1 .arrow { color: var(--muted); font-weight: 400; margin: 0 6px; }
h2 { font-size: 17px; margin: 0 0 10px; font-weight: 650; display: flex; align-items: center; gap: 10px; flex-wrap: wrap; }
h3 { font-size: 13px; margin: 22px 0 10px; color: #374151; text-transform: uppercase; letter-spacing: .05em; }
.sub { color: var(--muted); margin: 0; }
.sub strong { color: #374151; font-weight: 600; }
code { font: 12.5px/1.3 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; background: #eef2ff;
       color: #3730a3; padding: 2px 6px; border-radius: 4px; overflow-wrap: anywhere; }
section.card { background: var(--card); border: 1px solid var(--line); border-radius: 10px; padding: 18px 20px;
               margin: 16px 0; box-shadow: 0 1px 2px rgba(16,24,40,.04); }
.kpis { display: grid; grid-template-columns: repeat(auto-fit, minmax(170px, 1fr)); gap: 12px; margin: 16px 0; }
.kpi { background: var(--card); border: 1px solid var(--line); border-radius: 10px; padding: 12px 14px; }
.kpi .label { font-size: 11.5px; color: var(--muted); text-transform: uppercase; letter-spacing: .05em; font-weight: 600; }
.kpi .value { font-size: 22px; font-weight: 650; margin: 2px 0; font-variant-numeric: tabular-nums; }
.kpi .detail { font-size: 12px; color: var(--muted); font-variant-numeric: tabular-nums; }
.good { color: var(--good); } .bad { color: var(--bad); } .warn { color: var(--warn); }
table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
th, td { padding: 7px 10px; border-bottom: 1px solid var(--line); text-align: left; vertical-align: middle; }
th { font-size: 11.5px; color: var(--muted); text-transform: uppercase; letter-spacing: .04em; font-weight: 600;
     background: #fafbfc; }
tbody tr:last-child td { border-bottom: none; }
td.num, th.num { text-align: right; white-space: nowrap; }
td.node { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12.5px; white-space: nowrap; }
td.node.long { white-space: normal; min-width: 14em; }
td.detail { color: #4b5563; font-size: 13px; }
tr.skipped td { color: var(--muted); }
tr.total td { font-weight: 600; background: #fafbfc; }
.tag { display: inline-block; padding: 1px 8px; border-radius: 999px; font-size: 11.5px; font-weight: 600;
       background: #dbeafe; color: #1e40af; white-space: nowrap; }
.tag.skipped { background: #f3f4f6; color: #6b7280; }
.tag.prune { background: #dcfce7; color: #166534; }
.bar { height: 5px; background: #e5e7eb; border-radius: 3px; margin-top: 4px; min-width: 90px; overflow: hidden; }
.bar span { display: block; height: 100%; background: var(--accent); border-radius: 3px; }
.arrow { color: #9ca3af; }
ul.notes { margin: 0 0 12px; padding-left: 18px; color: #374151; }
.meta { color: var(--muted); font-weight: 400; font-size: 13px; }
.badge { display: inline-flex; align-items: center; justify-content: center; width: 24px; height: 24px;
         border-radius: 50%; background: var(--ink); color: #fff; font-size: 12px; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(450px, 1fr)); gap: 14px; }
figure { margin: 0; border: 1px solid var(--line); border-radius: 8px; padding: 10px 12px 6px; background: #fff; }
figcaption { font-size: 12.5px; color: #374151; margin-bottom: 4px; }
figcaption .node { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-weight: 600; }
svg.chart { display: block; max-width: 100%; height: auto; }
svg.spectrum { width: 100%; }
svg.sensitivity { width: 100%; max-width: 1000px; }
svg.pareto { width: 100%; max-width: 1000px; }
.tag.ok { background: #dcfce7; color: #166534; }
.tag.over { background: #fee2e2; color: #991b1b; }
.tag.chosen { background: var(--ink); color: #fff; }
.tag.pareto { background: #dbeafe; color: #1e40af; }
.tag.ft { background: #fef3c7; color: #92400e; }
tr.chosen td { background: #eff6ff; }
td.tags { white-space: nowrap; }
td.config { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12px; color: #374151;
            overflow-wrap: anywhere; min-width: 18em; }
.empty { color: var(--muted); font-style: italic; }
footer { color: var(--muted); font-size: 12px; margin-top: 24px; text-align: center; }
)CSS";
  return kCss;
}

}  // namespace report

namespace {


std::string BaseName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string Arrow() { return " <span class=\"arrow\">→</span> "; }

// A before → after cell with a bar showing what is left.
std::string BeforeAfter(int64_t before, int64_t after, bool bar) {
  std::string s = Grouped(before) + Arrow() + Grouped(after);
  if (bar && before > 0) {
    const double frac = std::min(1.0, std::max(0.0, static_cast<double>(after) / static_cast<double>(before)));
    s += "<div class=\"bar\"><span style=\"width:" + Fixed(100 * frac, 1) + "%\"></span></div>";
  }
  return s;
}

// "good" when a cost went down, "bad" when it went up.
std::string ChangeClass(double before, double after) {
  if (!(before > 0) || std::fabs(after - before) < 1e-9 * before) return "";
  return after < before ? "good" : "bad";
}

std::string Kpis(const CompressionReport& r) {
  std::string s;
  auto count_kpi = [&](const std::string& label, int64_t b, int64_t a, bool bytes) {
    if (b < 0 || a < 0) return;
    const std::string pct = ChangePercent(b, a);
    s += KpiHtml(label, pct.empty() ? "—" : pct, ChangeClass(b, a),
             (bytes ? report::HumanBytes(b) : Grouped(b)) + Arrow() + (bytes ? report::HumanBytes(a) : Grouped(a)));
  };
  count_kpi("MACs / sample", r.before.macs, r.after.macs, false);
  count_kpi("Parameters", r.before.params, r.after.params, false);
  count_kpi("File size", r.before.file_bytes, r.after.file_bytes, true);
  if (r.before.accuracy >= 0 && r.after.accuracy >= 0) {
    const double pp = 100 * (r.after.accuracy - r.before.accuracy);
    const std::string cls = pp <= -2 ? "bad" : pp < -0.5 ? "warn" : "good";
    s += KpiHtml("Accuracy", (pp >= 0 ? "+" : "") + Fixed(pp, 2) + " pp", cls,
             Fixed(100 * r.before.accuracy, 2) + "%" + Arrow() + Fixed(100 * r.after.accuracy, 2) + "%");
  }
  if (r.before.latency_p50_ms > 0 && r.after.latency_p50_ms > 0) {
    const double speedup = r.before.latency_p50_ms / r.after.latency_p50_ms;
    s += KpiHtml("Speed-up @ batch " + std::to_string(r.bench_batch), Fixed(speedup, 2) + "×",
             speedup >= 1 ? "good" : "bad",
             Fixed(r.before.latency_p50_ms, 3) + " ms" + Arrow() + Fixed(r.after.latency_p50_ms, 3) + " ms (p50)");
  }
  return s.empty() ? "" : "<div class=\"kpis\">" + s + "</div>";
}

std::string SummaryTable(const CompressionReport& r) {
  std::string rows;
  auto row = [&](const std::string& what, const std::string& b, const std::string& a, const std::string& change,
                 const std::string& cls) {
    rows += "<tr>" + TdHtml("", what) + TdHtml("num", b) + TdHtml("num", a) + TdHtml("num " + cls, change) + "</tr>";
  };
  auto count_row = [&](const std::string& what, int64_t b, int64_t a) {
    if (b < 0 || a < 0) return;
    std::string change = report::Ratio(b, a);
    const std::string pct = ChangePercent(b, a);
    if (!pct.empty()) change += " (" + pct + ")";
    row(what, Grouped(b), Grouped(a), change, ChangeClass(b, a));
  };
  count_row("File bytes", r.before.file_bytes, r.after.file_bytes);
  count_row("Parameters", r.before.params, r.after.params);
  count_row("Parameter bytes", r.before.param_bytes, r.after.param_bytes);
  count_row("MACs per sample", r.before.macs, r.after.macs);
  if (r.before.accuracy >= 0 && r.after.accuracy >= 0) {
    const double pp = 100 * (r.after.accuracy - r.before.accuracy);
    std::string what = "Top-1 accuracy";
    if (!r.eval_data.empty())
      what += " <span class=\"meta\">(" + HtmlEscape(r.eval_data) + ", " + Grouped(r.eval_samples) + " samples)</span>";
    row(what, Fixed(100 * r.before.accuracy, 2) + "%", Fixed(100 * r.after.accuracy, 2) + "%",
        (pp >= 0 ? "+" : "") + Fixed(pp, 2) + " pp", pp <= -2 ? "bad" : pp < -0.5 ? "warn" : "");
  }
  if (r.output_max_abs >= 0)
    row("Outputs vs original", "", "", "cosine " + Fixed(r.output_cosine, 6) + ", max |diff| " + report::Sig(r.output_max_abs),
        "");
  if (r.before.latency_p50_ms > 0 && r.after.latency_p50_ms > 0)
    row("Latency p50 @ batch " + std::to_string(r.bench_batch), Fixed(r.before.latency_p50_ms, 3) + " ms",
        Fixed(r.after.latency_p50_ms, 3) + " ms", report::SpeedupText(r.before.latency_p50_ms, r.after.latency_p50_ms, "×"),
        r.after.latency_p50_ms < r.before.latency_p50_ms ? "good" : "bad");
  if (r.before.throughput > 0 && r.after.throughput > 0)
    row("Throughput @ batch " + std::to_string(r.bench_batch), Grouped(std::llround(r.before.throughput)) + " /s",
        Grouped(std::llround(r.after.throughput)) + " /s", report::Ratio(r.before.throughput, r.after.throughput),
        r.after.throughput > r.before.throughput ? "good" : "bad");
  return "<table class=\"summary\"><thead><tr><th></th><th class=\"num\">Before</th><th class=\"num\">After</th>"
         "<th class=\"num\">Change</th></tr></thead><tbody>" +
         rows + "</tbody></table>";
}

std::string LayerTable(const PassReport& p) {
  if (p.layers.empty()) return "<p class=\"empty\">No layer matched.</p>";
  std::string rows;
  for (const LayerReport& l : p.layers) {
    const bool skipped = l.action == "skipped";
    std::string setting = "—";
    if (l.setting > 0)
      setting = Grouped(l.setting) + (l.full_setting > 0 ? " / " + Grouped(l.full_setting) : std::string());
    const std::string tag_class = skipped ? "tag skipped" : l.action.rfind("prune", 0) == 0 ? "tag prune" : "tag";
    rows += std::string("<tr") + (skipped ? " class=\"skipped\"" : "") + ">" + NodeCellHtml(l.node) +
            TdHtml("", HtmlEscape(l.op_type)) + TdHtml("", "<span class=\"" + tag_class + "\">" + HtmlEscape(l.action) + "</span>") +
            TdHtml("num", setting) + TdHtml("num", BeforeAfter(l.params_before, l.params_after, false)) +
            TdHtml("num", BeforeAfter(l.macs_before, l.macs_after, !skipped)) +
            TdHtml("num " + ChangeClass(l.macs_before, l.macs_after), ChangePercent(l.macs_before, l.macs_after)) +
            TdHtml("detail", HtmlEscape(skipped ? l.reason : l.detail)) + "</tr>";
  }
  const report::RewrittenTotals t = report::SumRewritten(p);
  if (t.layers > 1)
    rows += "<tr class=\"total\"><td colspan=\"4\">Total (" + std::to_string(t.layers) + " rewritten layers)</td>" +
            TdHtml("num", BeforeAfter(t.params_before, t.params_after, false)) +
            TdHtml("num", BeforeAfter(t.macs_before, t.macs_after, true)) +
            TdHtml("num " + ChangeClass(t.macs_before, t.macs_after), ChangePercent(t.macs_before, t.macs_after)) +
            TdHtml("", "") + "</tr>";
  return "<table class=\"layers\"><thead><tr><th>Node</th><th>Op</th><th>Action</th><th class=\"num\">Rank / kept</th>"
         "<th class=\"num\">Params</th><th class=\"num\">MACs / sample</th><th class=\"num\">Change</th><th>Detail</th>"
         "</tr></thead><tbody>" +
         rows + "</tbody></table>";
}

std::string PassSection(const PassReport& p, int index) {
  std::string s = "<section class=\"card pass\"><h2><span class=\"badge\">" + std::to_string(index) + "</span>" +
                  HtmlEscape(p.pass) + (p.config.empty() ? "" : " <code>" + HtmlEscape(p.config) + "</code>") +
                  " <span class=\"meta\">" + Fixed(p.seconds, 2) + " s</span></h2>";
  if (!p.notes.empty()) {
    s += "<ul class=\"notes\">";
    for (const std::string& n : p.notes) s += "<li>" + HtmlEscape(n) + "</li>";
    s += "</ul>";
  }
  s += LayerTable(p);
  std::string figures;
  for (const LayerReport& l : p.layers) {
    const std::string svg = report::SpectrumSvg(l);
    if (svg.empty()) continue;
    const bool skipped = l.action == "skipped";
    figures += "<figure><figcaption><span class=\"node\">" + HtmlEscape(l.node) + "</span> · " + HtmlEscape(l.op_type) +
               " · " + HtmlEscape(skipped ? "skipped: " + l.reason : l.detail) + "</figcaption>" + svg + "</figure>";
  }
  if (!figures.empty()) s += "<h3>Singular-value spectra</h3><div class=\"grid\">" + figures + "</div>";
  const std::string sens = report::SensitivitySvg(p);
  if (!sens.empty())
    s += "<h3>Sensitivity: accuracy vs. compression per layer</h3><figure>" + sens + "</figure>";
  return s + "</section>";
}

}  // namespace

std::string ToHtml(const CompressionReport& r) {
  const std::string in = BaseName(r.input_path), out = BaseName(r.output_path);
  std::string passes;
  for (size_t i = 0; i < r.passes.size(); ++i)
    passes += (i ? " → " : "") + std::string("<code>") + HtmlEscape(r.passes[i].pass) +
              (r.passes[i].config.empty() ? "" : " " + HtmlEscape(r.passes[i].config)) + "</code>";

  std::string meta = "Passes " + (passes.empty() ? std::string("none") : passes);
  if (!r.calibration_data.empty())
    meta += " · calibration <strong>" + HtmlEscape(r.calibration_data) + "</strong> (" + Grouped(r.calibration_samples) + " samples)";
  meta += " · " + Fixed(r.seconds, 1) + " s · " + std::to_string(r.threads) + " thread" + (r.threads == 1 ? "" : "s");

  std::string h = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                  "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>Compression report: " +
                  HtmlEscape(in) + " → " + HtmlEscape(out) + "</title>\n<style>" + report::PageCss() + "</style>\n</head>\n<body>\n<main>\n";
  h += "<header><div class=\"eyebrow\">Whittle · compression report</div><h1 title=\"" + HtmlEscape(r.input_path) +
       " → " + HtmlEscape(r.output_path) + "\">" + HtmlEscape(in) + "<span class=\"arrow\">→</span>" + HtmlEscape(out) +
       "</h1><p class=\"sub\">" + meta + "</p></header>\n";
  h += Kpis(r) + "\n";
  h += "<section class=\"card\"><h2>Summary</h2>" + SummaryTable(r) + "</section>\n";
  if (r.search) h += SearchHtml(*r.search);
  for (size_t i = 0; i < r.passes.size(); ++i) h += PassSection(r.passes[i], static_cast<int>(i) + 1) + "\n";
  h += "<footer>Generated by Whittle. MACs and parameters are per sample (batch 1); latency measured on Whittle's CPU "
       "runtime. This page is self-contained: no scripts and no external resources.</footer>\n</main>\n</body>\n</html>\n";
  return h;
}

}  // namespace whittle
