#include "passes/report/report_format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace whittle::report {

std::string Grouped(int64_t v) {
  const bool neg = v < 0;
  // Through uint64 so that INT64_MIN does not overflow on negation.
  uint64_t u = neg ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  std::string digits = std::to_string(u), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return neg ? "-" + out : out;
}

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string Sig(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

std::string ChangePercent(double before, double after) {
  if (!(before > 0)) return "";
  const double pct = 100.0 * (after - before) / before;
  // "-0.0%" reads like a change; show an exact zero as "0.0%".
  if (std::fabs(pct) < 0.05) return "0.0%";
  return (pct > 0 ? "+" : "") + Fixed(pct, 1) + "%";
}

std::string Ratio(double before, double after) {
  if (!(before > 0)) return "";
  return Fixed(after / before, 2) + "x";
}

std::string SpeedupText(double before_ms, double after_ms, const std::string& unit) {
  if (!(before_ms > 0) || !(after_ms > 0)) return "";
  return after_ms <= before_ms ? Fixed(before_ms / after_ms, 2) + unit + " faster"
                               : Fixed(after_ms / before_ms, 2) + unit + " slower";
}

std::string HumanBytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (std::fabs(v) >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? Grouped(bytes) + " B" : Fixed(v, 1) + " " + units[u];
}

size_t DisplayWidth(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::string HtmlEscape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

void TextTable::Columns(std::vector<std::string> headers, std::vector<Align> align) {
  headers_ = std::move(headers);
  align_ = std::move(align);
  align_.resize(headers_.size(), kLeft);
}

void TextTable::Row(std::vector<std::string> cells) {
  cells.resize(headers_.size());
  rows_.push_back(std::move(cells));
}

std::string TextTable::Render(const std::string& indent) const {
  std::vector<size_t> width(headers_.size(), 0);
  for (size_t c = 0; c < headers_.size(); ++c) {
    width[c] = DisplayWidth(headers_[c]);
    for (const auto& r : rows_) width[c] = std::max(width[c], DisplayWidth(r[c]));
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string s = indent;
    for (size_t c = 0; c < cells.size(); ++c) {
      const std::string pad(width[c] - DisplayWidth(cells[c]), ' ');
      if (c > 0) s += "  ";
      s += align_[c] == kRight ? pad + cells[c] : cells[c] + pad;
    }
    while (!s.empty() && s.back() == ' ') s.pop_back();
    return s + "\n";
  };
  std::string out = line(headers_);
  for (const auto& r : rows_) out += line(r);
  return out;
}

RewrittenTotals SumRewritten(const PassReport& pass) {
  RewrittenTotals t;
  for (const LayerReport& l : pass.layers) {
    if (l.action == "skipped") continue;
    ++t.layers;
    t.params_before += l.params_before;
    t.params_after += l.params_after;
    t.macs_before += l.macs_before;
    t.macs_after += l.macs_after;
  }
  return t;
}

std::string TdHtml(const std::string& cls, const std::string& html) {
  return "<td" + (cls.empty() ? "" : " class=\"" + cls + "\"") + ">" + html + "</td>";
}

std::string NodeCellHtml(const std::string& name) {
  if (DisplayWidth(name) <= 28) return "<td class=\"node\">" + HtmlEscape(name) + "</td>";
  std::string html;
  for (char c : name) {
    html += HtmlEscape(std::string(1, c));
    if (c == '/' || c == '.' || c == '_' || c == ':') html += "<wbr>";
  }
  return "<td class=\"node long\">" + html + "</td>";
}

std::string KpiHtml(const std::string& label, const std::string& value, const std::string& value_class,
                    const std::string& detail) {
  return "<div class=\"kpi\"><div class=\"label\">" + label + "</div><div class=\"value " + value_class + "\">" + value +
         "</div><div class=\"detail\">" + detail + "</div></div>";
}

}  // namespace whittle::report
