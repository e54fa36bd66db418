// Formatting helpers shared by the report renderers (text, HTML): grouped integers, signed
// percentages, ratios, UTF-8 display widths for aligned tables, and HTML escaping. Internal to
// passes/report; the figures themselves come from the CompressionReport unchanged.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "passes/pass.h"

namespace whittle::report {

// 1234567 -> "1,234,567".
std::string Grouped(int64_t v);
// printf("%.*f").
std::string Fixed(double v, int digits);
// printf("%.3g"): 0.0123, 1.5e-07.
std::string Sig(double v);
// Change from before to after as a signed percentage: (100, 40) -> "-60.0%"; "" when before <= 0.
std::string ChangePercent(double before, double after);
// after / before as "0.40x"; "" when before <= 0.
std::string Ratio(double before, double after);
// Latency before/after as "2.50x faster" or "1.25x slower"; unit is "x" or "×".
std::string SpeedupText(double before_ms, double after_ms, const std::string& unit);
// Bytes with a binary unit: "919.1 KiB".
std::string HumanBytes(int64_t bytes);
// Columns a UTF-8 string occupies in a terminal (code points; no wide-character tables).
size_t DisplayWidth(const std::string& s);
// Escapes & < > " ' for HTML text and attribute values.
std::string HtmlEscape(const std::string& s);
// HTML pieces the report pages share: a table cell (class may be empty) around html; a node-name
// cell (long exporter names such as "/encoder/layer.3/attention/MatMul" may wrap after their
// separators, short ones never); a KPI box (label, value with a class, detail; html).
std::string TdHtml(const std::string& cls, const std::string& html);
std::string NodeCellHtml(const std::string& name);
std::string KpiHtml(const std::string& label, const std::string& value, const std::string& value_class,
                    const std::string& detail);
// The style sheet of the HTML reports (compress-model's and finetune-model's pages share it).
const char* PageCss();

// Sums over the layers a pass rewrote (skipped rows left out): the tables' total row.
struct RewrittenTotals {
  int layers = 0;
  int64_t params_before = 0, params_after = 0, macs_before = 0, macs_after = 0;
};
RewrittenTotals SumRewritten(const PassReport& pass);

// A text table: columns sized to their widest cell, numbers right-aligned.
class TextTable {
 public:
  enum Align { kLeft, kRight };
  void Columns(std::vector<std::string> headers, std::vector<Align> align);
  void Row(std::vector<std::string> cells);
  // Each line starts with `indent`; trailing spaces are trimmed.
  std::string Render(const std::string& indent) const;
  bool empty() const { return rows_.empty(); }

 private:
  std::vector<std::string> headers_;
  std::vector<Align> align_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace whittle::report
