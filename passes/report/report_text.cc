// Text rendering of a CompressionReport: the tables compress-model prints on stdout.
#include <cstdio>

#include "passes/report/report.h"
#include "passes/report/report_format.h"

namespace whittle {

using report::ChangePercent;
using report::Fixed;
using report::Grouped;
using report::Ratio;
using report::SpeedupText;
using report::TextTable;

namespace {

std::string Setting(const LayerReport& l) {
  if (l.setting <= 0) return "-";
  return l.full_setting > 0 ? std::to_string(l.setting) + "/" + std::to_string(l.full_setting)
                            : std::to_string(l.setting);
}

std::string Percent(double fraction) { return Fixed(100.0 * fraction, 2) + "%"; }

}  // namespace

std::string PassTableText(const PassReport& pass, int index) {
  std::string out = "pass " + std::to_string(index) + ": " + pass.pass;
  if (!pass.config.empty()) out += " " + pass.config;
  out += "  (" + Fixed(pass.seconds, 2) + " s)\n";
  if (pass.layers.empty()) {
    out += "  no layer matched\n";
  } else {
    TextTable t;
    t.Columns({"node", "op", "action", "rank/kept", "params", "→ after", "MACs", "→ after", "MACs change", "detail"},
              {TextTable::kLeft, TextTable::kLeft, TextTable::kLeft, TextTable::kRight, TextTable::kRight,
               TextTable::kRight, TextTable::kRight, TextTable::kRight, TextTable::kRight, TextTable::kLeft});
    for (const LayerReport& l : pass.layers) {
      const bool skipped = l.action == "skipped";
      t.Row({l.node, l.op_type, l.action, Setting(l), Grouped(l.params_before), Grouped(l.params_after),
             Grouped(l.macs_before), Grouped(l.macs_after), ChangePercent(l.macs_before, l.macs_after),
             skipped ? l.reason : l.detail});
    }
    const report::RewrittenTotals s = report::SumRewritten(pass);
    if (s.layers > 1)
      t.Row({"total (" + std::to_string(s.layers) + " rewritten)", "", "", "", Grouped(s.params_before),
             Grouped(s.params_after), Grouped(s.macs_before), Grouped(s.macs_after),
             ChangePercent(s.macs_before, s.macs_after), ""});
    out += t.Render("  ");
  }
  for (const std::string& n : pass.notes) out += "  note: " + n + "\n";
  return out;
}

std::string SummaryText(const CompressionReport& r) {
  std::string out = "summary: " + r.input_path + " → " + r.output_path + "\n";
  TextTable t;
  t.Columns({"", "before", "after", "change"},
            {TextTable::kLeft, TextTable::kRight, TextTable::kRight, TextTable::kLeft});
  auto count_row = [&](const std::string& what, int64_t b, int64_t a) {
    if (b < 0 || a < 0) return;
    std::string change = Ratio(b, a);
    const std::string pct = ChangePercent(b, a);
    if (!pct.empty()) change += " (" + pct + ")";
    t.Row({what, Grouped(b), Grouped(a), change});
  };
  count_row("file bytes", r.before.file_bytes, r.after.file_bytes);
  count_row("params", r.before.params, r.after.params);
  count_row("MACs/sample", r.before.macs, r.after.macs);
  if (r.before.accuracy >= 0 && r.after.accuracy >= 0) {
    const double pp = 100.0 * (r.after.accuracy - r.before.accuracy);
    std::string change = (pp >= 0 ? "+" : "") + Fixed(pp, 2) + " pp";
    if (!r.eval_data.empty()) change += "  (" + r.eval_data + ", " + std::to_string(r.eval_samples) + " samples)";
    t.Row({"accuracy", Percent(r.before.accuracy), Percent(r.after.accuracy), change});
  }
  if (r.output_max_abs >= 0)
    t.Row({"outputs vs original", "", "", "cosine " + Fixed(r.output_cosine, 6) + ", max |diff| " +
                                              report::Sig(r.output_max_abs)});
  const std::string at = " @" + std::to_string(r.bench_batch);
  if (r.before.latency_p50_ms > 0 && r.after.latency_p50_ms > 0)
    t.Row({"latency p50" + at, Fixed(r.before.latency_p50_ms, 3) + " ms", Fixed(r.after.latency_p50_ms, 3) + " ms",
           SpeedupText(r.before.latency_p50_ms, r.after.latency_p50_ms, "x")});
  if (r.before.throughput > 0 && r.after.throughput > 0)
    t.Row({"throughput" + at, Grouped(static_cast<int64_t>(r.before.throughput + 0.5)) + "/s",
           Grouped(static_cast<int64_t>(r.after.throughput + 0.5)) + "/s", Ratio(r.before.throughput, r.after.throughput)});
  out += t.Render("  ");
  for (const std::string& n : r.notes) out += "  note: " + n + "\n";
  return out;
}

std::string ToText(const CompressionReport& r) {
  std::string out;
  if (r.search) out += SearchText(*r.search) + "\n";
  for (size_t i = 0; i < r.passes.size(); ++i) out += PassTableText(r.passes[i], static_cast<int>(i) + 1) + "\n";
  out += SummaryText(r);
  return out;
}

}  // namespace whittle
