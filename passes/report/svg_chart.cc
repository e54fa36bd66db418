#include "passes/report/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "passes/report/report.h"
#include "passes/report/report_format.h"

namespace whittle::report {
namespace {

const char* const kPalette[] = {"#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c",
                                "#0891b2", "#db2777", "#65a30d", "#4f46e5", "#ca8a04"};
constexpr int kPaletteSize = sizeof(kPalette) / sizeof(kPalette[0]);

// Coordinates with one decimal: enough for a screen, and keeps the page small.
std::string N(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

// A tick label with as many decimals as the tick step needs.
std::string TickLabel(double v, double step) {
  int decimals = 0;
  if (step > 0 && step < 1) decimals = static_cast<int>(std::ceil(-std::log10(step) - 1e-9));
  if (std::fabs(v) < step * 1e-6) v = 0;  // no "-0"
  return Fixed(v, std::min(decimals, 6));
}

// A power-of-ten label on a log axis: 0.001 .. 10000 written out, beyond that 1e-5, 1e6.
std::string PowerLabel(double mantissa, int exp) {
  if (exp >= -3 && exp <= 4) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", mantissa * std::pow(10.0, exp));
    return buf;
  }
  return (mantissa == 1 ? "" : TickLabel(mantissa, 1) + "×") + "1e" + std::to_string(exp);
}

std::string Text(double x, double y, const std::string& s, const std::string& attrs) {
  return "<text x=\"" + N(x) + "\" y=\"" + N(y) + "\" " + attrs + ">" + HtmlEscape(s) + "</text>";
}

std::string Line(double x1, double y1, double x2, double y2, const std::string& attrs) {
  return "<line x1=\"" + N(x1) + "\" y1=\"" + N(y1) + "\" x2=\"" + N(x2) + "\" y2=\"" + N(y2) + "\" " + attrs + "/>";
}

std::string SvgOpen(int w, int h, const std::string& cls, const std::string& label) {
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"" + cls + "\" viewBox=\"0 0 " + std::to_string(w) + " " +
         std::to_string(h) + "\" width=\"" + std::to_string(w) + "\" height=\"" + std::to_string(h) +
         "\" role=\"img\" aria-label=\"" + HtmlEscape(label) + "\" font-family=\"inherit\" font-size=\"11\">";
}

// Shortens long names for legends, keeping both ends ("/encoder/layer.0/…/query/MatMul"): layer
// names from exporters share long prefixes and differ in the middle or at the end. The full
// name stays in a tooltip.
std::string Shorten(const std::string& s, size_t max_chars) {
  std::vector<std::string> chars;  // UTF-8 code points
  for (size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80 || chars.empty()) chars.emplace_back();
    chars.back() += s[i];
  }
  if (chars.size() <= max_chars) return s;
  const size_t head = (max_chars - 1) / 2, tail = max_chars - 1 - head;
  std::string out;
  for (size_t i = 0; i < head; ++i) out += chars[i];
  out += "…";
  for (size_t i = chars.size() - tail; i < chars.size(); ++i) out += chars[i];
  return out;
}

}  // namespace

std::vector<double> NiceTicks(double lo, double hi, int count) {
  if (!(hi > lo)) {
    const double pad = std::fabs(lo) > 0 ? std::fabs(lo) * 0.05 : 1.0;
    lo -= pad;
    hi += pad;
  }
  const double raw = (hi - lo) / std::max(1, count);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    step = m * mag;
    if (step >= raw) break;
  }
  std::vector<double> ticks;
  const double start = std::floor(lo / step + 1e-9) * step;
  for (double t = start; t <= hi + step * (1 - 1e-9) && ticks.size() < 64; t += step) ticks.push_back(t);
  if (ticks.back() < hi - 1e-9 * step) ticks.push_back(ticks.back() + step);
  return ticks;
}

std::string SpectrumSvg(const LayerReport& l) {
  const std::vector<float>& s = l.spectrum;
  if (s.empty()) return "";
  const int W = 440, H = 250;
  const double x0 = 56, y0 = 26, w = W - x0 - 18, h = H - y0 - 44;
  const int n = static_cast<int>(s.size());

  double maxv = 0, minpos = 0;
  for (float v : s) {
    const double d = v;
    if (!std::isfinite(d)) continue;
    maxv = std::max(maxv, d);
    if (d > 0 && (minpos == 0 || d < minpos)) minpos = d;
  }
  std::string svg = SvgOpen(W, H, "chart spectrum", "singular values of " + l.node);
  if (maxv <= 0) {
    svg += Text(W / 2.0, H / 2.0, "all singular values are zero", "text-anchor=\"middle\" fill=\"#6b7280\"");
    return svg + "</svg>";
  }
  // Log y over whole decades; very small values (numerical zeros) sit on the floor.
  int hi_exp = static_cast<int>(std::ceil(std::log10(maxv) - 1e-9));
  int lo_exp = static_cast<int>(std::floor(std::log10(minpos) + 1e-9));
  if (hi_exp - lo_exp > 8) lo_exp = hi_exp - 8;
  if (lo_exp >= hi_exp) lo_exp = hi_exp - 1;
  const double llo = lo_exp, lhi = hi_exp;
  auto Y = [&](double v) {
    const double lv = v > 0 ? std::max(llo, std::log10(v)) : llo;
    return y0 + h - (lv - llo) / (lhi - llo) * h;
  };
  auto X = [&](double i) { return n == 1 ? x0 + w / 2 : x0 + (i - 1) / (n - 1) * w; };

  // Grid and y ticks: decades, thinned when many; 2 and 5 as well when the range is one decade.
  const int span = hi_exp - lo_exp;
  const int every = std::max(1, (span + 4) / 5);
  for (int e = lo_exp; e <= hi_exp; ++e) {
    if ((e - lo_exp) % every != 0) continue;
    const double y = Y(std::pow(10.0, e));
    svg += Line(x0, y, x0 + w, y, "stroke=\"#e5e7eb\"");
    svg += Text(x0 - 6, y + 3.5, PowerLabel(1, e), "text-anchor=\"end\" fill=\"#6b7280\"");
  }
  if (span == 1) {
    for (double m : {2.0, 5.0}) {
      const double y = Y(m * std::pow(10.0, lo_exp));
      svg += Line(x0, y, x0 + w, y, "stroke=\"#f1f5f9\"");
      svg += Text(x0 - 6, y + 3.5, PowerLabel(m, lo_exp), "text-anchor=\"end\" fill=\"#9ca3af\"");
    }
  }
  // x ticks: integer indices.
  for (double t : NiceTicks(1, n, 6)) {
    if (t < 1 || t > n || std::fabs(t - std::round(t)) > 1e-9) continue;
    const double x = X(t);
    svg += Line(x, y0 + h, x, y0 + h + 4, "stroke=\"#9ca3af\"");
    svg += Text(x, y0 + h + 16, std::to_string(static_cast<int64_t>(t)), "text-anchor=\"middle\" fill=\"#6b7280\"");
  }
  svg += Line(x0, y0 + h, x0 + w, y0 + h, "stroke=\"#9ca3af\"");
  svg += Line(x0, y0, x0, y0 + h, "stroke=\"#9ca3af\"");
  svg += Text(x0 + w / 2, H - 8, "singular value index", "text-anchor=\"middle\" fill=\"#374151\"");
  svg += Text(14, y0 + h / 2, "σ (log scale)",
              "text-anchor=\"middle\" fill=\"#374151\" transform=\"rotate(-90 14 " + N(y0 + h / 2) + ")\"");

  const bool marked = l.setting > 0 && l.action != "skipped" && l.setting <= n;
  const int kept = marked ? static_cast<int>(l.setting) : 0;
  std::string all, keep;
  for (int i = 0; i < n; ++i) {
    const std::string pt = N(X(i + 1)) + "," + N(Y(s[i])) + " ";
    all += pt;
    if (i < kept) keep += pt;
  }
  if (kept > 0) {
    svg += "<polygon points=\"" + N(X(1)) + "," + N(y0 + h) + " " + keep + N(X(kept)) + "," + N(y0 + h) +
           "\" fill=\"#2563eb\" fill-opacity=\"0.14\"/>";
  }
  svg += "<polyline points=\"" + all + "\" fill=\"none\" stroke=\"#94a3b8\" stroke-width=\"1.5\"/>";
  if (kept > 0) {
    svg += "<polyline points=\"" + keep + "\" fill=\"none\" stroke=\"#2563eb\" stroke-width=\"2\"/>";
    double total = 0, part = 0;
    for (int i = 0; i < n; ++i) {
      const double sq = static_cast<double>(s[i]) * s[i];
      total += sq;
      if (i < kept) part += sq;
    }
    const double x = X(kept);
    svg += Line(x, y0 - 4, x, y0 + h, "class=\"rank-marker\" stroke=\"#dc2626\" stroke-width=\"1.5\" stroke-dasharray=\"4 3\"");
    const bool left = x > x0 + 0.68 * w;
    const std::string anchor = left ? "text-anchor=\"end\"" : "text-anchor=\"start\"";
    const double tx = left ? x - 6 : x + 6;
    svg += Text(tx, y0 + 10, "rank " + std::to_string(kept), anchor + " font-weight=\"600\" fill=\"#dc2626\"");
    if (total > 0) {
      // Two decimals near 100 % so that a truncated spectrum never reads as "100.0%".
      const double pct = 100 * part / total;
      std::string label = Fixed(pct, pct >= 99 && part < total ? 2 : 1) + "% energy";
      if (part < total && label.rfind("100.", 0) == 0) label = "> 99.99% energy";
      svg += Text(tx, y0 + 24, label, anchor + " fill=\"#dc2626\"");
    }
  }
  return svg + "</svg>";
}

std::string SensitivitySvg(const PassReport& pass) {
  std::vector<const LayerReport*> layers;
  for (const LayerReport& l : pass.layers)
    if (!l.sensitivity.empty()) layers.push_back(&l);
  if (layers.empty()) return "";

  double xmin = 0, xmax = 1, ymin = 1, ymax = 0;
  for (const LayerReport* l : layers)
    for (const SensitivityPoint& p : l->sensitivity) {
      xmin = std::min(xmin, p.compression);
      xmax = std::max(xmax, p.compression);
      ymin = std::min(ymin, p.accuracy);
      ymax = std::max(ymax, p.accuracy);
    }
  const int legend_w = 200;
  const int W = 880, H = std::max(340, 60 + 18 * static_cast<int>(layers.size()));
  const double x0 = 60, y0 = 20, w = W - x0 - legend_w - 20, h = H - y0 - 48;
  const std::vector<double> xt = NiceTicks(100 * xmin, 100 * xmax, 10);
  const std::vector<double> yt = NiceTicks(100 * ymin, 100 * ymax, 6);
  const double xlo = xt.front(), xhi = xt.back(), ylo = yt.front(), yhi = yt.back();
  auto X = [&](double c) { return x0 + (100 * c - xlo) / (xhi - xlo) * w; };
  auto Y = [&](double a) { return y0 + h - (100 * a - ylo) / (yhi - ylo) * h; };

  std::string svg = SvgOpen(W, H, "chart sensitivity", "accuracy versus compression per layer, pass " + pass.pass);
  const double xstep = xt.size() > 1 ? xt[1] - xt[0] : 1, ystep = yt.size() > 1 ? yt[1] - yt[0] : 1;
  for (double t : yt) {
    const double y = Y(t / 100);
    svg += Line(x0, y, x0 + w, y, "stroke=\"#e5e7eb\"");
    svg += Text(x0 - 6, y + 3.5, TickLabel(t, ystep), "text-anchor=\"end\" fill=\"#6b7280\"");
  }
  for (double t : xt) {
    const double x = X(t / 100);
    svg += Line(x, y0, x, y0 + h, "stroke=\"#f1f5f9\"");
    svg += Line(x, y0 + h, x, y0 + h + 4, "stroke=\"#9ca3af\"");
    svg += Text(x, y0 + h + 16, TickLabel(t, xstep), "text-anchor=\"middle\" fill=\"#6b7280\"");
  }
  svg += Line(x0, y0 + h, x0 + w, y0 + h, "stroke=\"#9ca3af\"");
  svg += Line(x0, y0, x0, y0 + h, "stroke=\"#9ca3af\"");
  svg += Text(x0 + w / 2, H - 10, "MACs removed in the layer (%)", "text-anchor=\"middle\" fill=\"#374151\"");
  svg += Text(16, y0 + h / 2, "accuracy on calibration data (%)",
              "text-anchor=\"middle\" fill=\"#374151\" transform=\"rotate(-90 16 " + N(y0 + h / 2) + ")\"");

  // Legend labels drop a prefix every name shares (up to a separator), so that names like
  // "/encoder/layer.3/attention/MatMul" show the part that tells them apart.
  size_t common = layers.size() > 1 ? layers[0]->node.size() : 0;
  for (const LayerReport* l : layers) {
    size_t i = 0;
    while (i < common && i < l->node.size() && l->node[i] == layers[0]->node[i]) ++i;
    common = i;
  }
  while (common > 0 && std::string("/._:").find(layers[0]->node[common - 1]) == std::string::npos) --common;
  for (const LayerReport* l : layers)
    if (l->node.size() <= common) common = 0;
  if (common < 4) common = 0;

  const double lx = x0 + w + 24;
  for (size_t k = 0; k < layers.size(); ++k) {
    const LayerReport& l = *layers[k];
    const std::string color = kPalette[k % kPaletteSize];
    // Past the palette, lines differ by dash pattern as well.
    const char* const dashes[] = {"", " stroke-dasharray=\"6 3\"", " stroke-dasharray=\"2 3\"", " stroke-dasharray=\"8 3 2 3\""};
    const std::string dash = dashes[(k / kPaletteSize) % 4];
    std::vector<SensitivityPoint> pts = l.sensitivity;
    std::stable_sort(pts.begin(), pts.end(),
                     [](const SensitivityPoint& a, const SensitivityPoint& b) { return a.compression < b.compression; });
    std::string line;
    for (const SensitivityPoint& p : pts) line += N(X(p.compression)) + "," + N(Y(p.accuracy)) + " ";
    svg += "<g class=\"series\"><title>" + HtmlEscape(l.node) + "</title>";
    svg += "<polyline points=\"" + line + "\" fill=\"none\" stroke=\"" + color + "\" stroke-width=\"1.8\"" + dash + "/>";
    for (const SensitivityPoint& p : pts) {
      const bool chosen = l.setting > 0 && p.setting == l.setting && l.action != "skipped";
      svg += "<circle cx=\"" + N(X(p.compression)) + "\" cy=\"" + N(Y(p.accuracy)) + "\" r=\"" + (chosen ? "5" : "2.6") +
             "\" " + (chosen ? "fill=\"#fff\" stroke=\"" + color + "\" stroke-width=\"2\"" : "fill=\"" + color + "\"") +
             "><title>" + HtmlEscape(l.node + ": setting " + std::to_string(p.setting) + ", " +
                                     Fixed(100 * p.compression, 1) + "% MACs removed, accuracy " +
                                     Fixed(100 * p.accuracy, 2) + "%" + (chosen ? " (chosen)" : "")) +
             "</title></circle>";
    }
    // A chosen setting that was not a measured point (e.g. a rank topped up after allocation)
    // is placed on the curve at its MAC reduction, with a dashed ring to show it is interpolated.
    const bool measured = std::any_of(pts.begin(), pts.end(), [&](const SensitivityPoint& p) { return p.setting == l.setting; });
    if (!measured && l.setting > 0 && l.action != "skipped" && l.macs_before > 0 && pts.size() >= 2) {
      const double c = 1.0 - static_cast<double>(l.macs_after) / static_cast<double>(l.macs_before);
      for (size_t i = 0; i + 1 < pts.size(); ++i) {
        const SensitivityPoint &a = pts[i], &b = pts[i + 1];
        if (c < a.compression || c > b.compression || b.compression <= a.compression) continue;
        const double acc = a.accuracy + (b.accuracy - a.accuracy) * (c - a.compression) / (b.compression - a.compression);
        svg += "<circle cx=\"" + N(X(c)) + "\" cy=\"" + N(Y(acc)) + "\" r=\"5\" fill=\"#fff\" stroke=\"" + color +
               "\" stroke-width=\"2\" stroke-dasharray=\"2 2\"><title>" +
               HtmlEscape(l.node + ": chosen setting " + std::to_string(l.setting) + ", " + Fixed(100 * c, 1) +
                          "% MACs removed (between measured points)") +
               "</title></circle>";
        break;
      }
    }
    svg += "</g>";
    const double ly = y0 + 8 + 18 * static_cast<double>(k);
    svg += Line(lx, ly - 5, lx + 16, ly - 5, "stroke=\"" + color + "\" stroke-width=\"2.5\"" + dash);
    svg += "<text x=\"" + N(lx + 20) + "\" y=\"" + N(ly - 1) + "\" fill=\"#374151\"><title>" + HtmlEscape(l.node) +
           "</title>" + HtmlEscape(Shorten(common ? "…" + l.node.substr(common) : l.node, 30)) + "</text>";
  }
  svg += Text(lx, H - 24, "ringed: chosen setting", "fill=\"#6b7280\"");
  svg += Text(lx, H - 10, "dashed ring: interpolated", "fill=\"#6b7280\"");
  return svg + "</svg>";
}

std::string LineChartSvg(const std::string& cls, const std::string& label, const std::string& x_title,
                         const std::string& y_title, const std::vector<LineSeries>& series, int y_digits) {
  double xmin = 0, xmax = 0, ymin = 0, ymax = 0;
  bool any = false;
  for (const LineSeries& s : series)
    for (const auto& [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      if (!any) {
        xmin = xmax = x;
        ymin = ymax = y;
        any = true;
      }
      xmin = std::min(xmin, x);
      xmax = std::max(xmax, x);
      ymin = std::min(ymin, y);
      ymax = std::max(ymax, y);
    }
  if (!any) return "";
  const bool legend = series.size() > 1;
  const int W = 460, H = legend ? 280 : 260;
  const double x0 = 60, y0 = 18, w = W - x0 - 20, h = H - y0 - (legend ? 66 : 44);
  if (xmax - xmin < 1) xmax = xmin + 1;  // one epoch: a point in the middle of [x-0.5, x+0.5] would hide the axis
  std::vector<double> xt = NiceTicks(xmin, xmax, 8);
  std::vector<double> whole;  // epochs are integers
  for (double t : xt)
    if (std::fabs(t - std::round(t)) < 1e-9) whole.push_back(t);
  if (whole.size() >= 2) xt = whole;
  const std::vector<double> yt = NiceTicks(ymin, ymax, 5);
  const double xlo = xt.front(), xhi = xt.back(), ylo = yt.front(), yhi = yt.back();
  auto X = [&](double v) { return x0 + (v - xlo) / (xhi - xlo) * w; };
  auto Y = [&](double v) { return y0 + h - (v - ylo) / (yhi - ylo) * h; };

  std::string svg = SvgOpen(W, H, "chart line " + cls, label);
  const double xstep = xt.size() > 1 ? xt[1] - xt[0] : 1, ystep = yt.size() > 1 ? yt[1] - yt[0] : 1;
  for (double t : yt) {
    const double y = Y(t);
    svg += Line(x0, y, x0 + w, y, "stroke=\"#e5e7eb\"");
    svg += Text(x0 - 6, y + 3.5, TickLabel(t, ystep), "text-anchor=\"end\" fill=\"#6b7280\"");
  }
  for (double t : xt) {
    const double x = X(t);
    svg += Line(x, y0 + h, x, y0 + h + 4, "stroke=\"#9ca3af\"");
    svg += Text(x, y0 + h + 16, TickLabel(t, xstep), "text-anchor=\"middle\" fill=\"#6b7280\"");
  }
  svg += Line(x0, y0 + h, x0 + w, y0 + h, "stroke=\"#9ca3af\"");
  svg += Line(x0, y0, x0, y0 + h, "stroke=\"#9ca3af\"");
  svg += Text(x0 + w / 2, y0 + h + 32, x_title, "text-anchor=\"middle\" fill=\"#374151\"");
  svg += Text(16, y0 + h / 2, y_title,
              "text-anchor=\"middle\" fill=\"#374151\" transform=\"rotate(-90 16 " + N(y0 + h / 2) + ")\"");
  double lx = x0;
  for (size_t k = 0; k < series.size(); ++k) {
    const LineSeries& s = series[k];
    if (s.points.empty()) continue;
    const std::string color = s.reference ? "#6b7280" : kPalette[k % kPaletteSize];
    const std::string dash = s.reference ? " stroke-dasharray=\"5 4\"" : "";
    std::string pts;
    for (const auto& [x, y] : s.points) pts += N(X(x)) + "," + N(Y(y)) + " ";
    svg += "<g class=\"series\"><title>" + HtmlEscape(s.name) + "</title>";
    svg += "<polyline points=\"" + pts + "\" fill=\"none\" stroke=\"" + color + "\" stroke-width=\"" +
           (s.reference ? "1.5" : "2") + "\"" + dash + "/>";
    if (!s.reference)
      for (const auto& [x, y] : s.points)
        svg += "<circle cx=\"" + N(X(x)) + "\" cy=\"" + N(Y(y)) + "\" r=\"3\" fill=\"" + color + "\"><title>" +
               HtmlEscape(s.name + ", " + x_title + " " + TickLabel(x, 1) + ": " + Fixed(y, y_digits)) +
               "</title></circle>";
    svg += "</g>";
    if (legend) {
      const double ly = H - 12;
      svg += Line(lx, ly - 4, lx + 16, ly - 4, "stroke=\"" + color + "\" stroke-width=\"2.5\"" + dash);
      svg += Text(lx + 20, ly, Shorten(s.name, 28), "fill=\"#374151\"");
      lx += 36 + 6.5 * static_cast<double>(std::min<size_t>(28, DisplayWidth(s.name)));
    }
  }
  return svg + "</svg>";
}

}  // namespace whittle::report

// The search's scatter chart (ParetoSvg) and its helpers.
namespace whittle::report {
namespace {

// The target's figure of a point in its own unit (bytes, MACs, ms); < 0 = not measured.
double PointFigure(const std::string& target, const SearchPointReport& p) {
  if (target == "latency") return p.latency_ms;
  if (target == "macs") return static_cast<double>(p.macs);
  return static_cast<double>(p.param_bytes);
}

// The x axis of a ParetoSvg: figure / scale is the axis value; the title names the unit.
struct ParetoAxis {
  double scale = 1;
  std::string title;
};

ParetoAxis ParetoAxisFor(const SearchReport& s, double max_figure) {
  if (s.target == "latency")
    return {1, "latency (ms" + (s.latency_batch > 0 ? ", batch " + std::to_string(s.latency_batch) : std::string()) + ")"};
  if (s.target == "macs") {
    if (max_figure >= 1e9) return {1e9, "MACs per sample (billions)"};
    if (max_figure >= 1e6) return {1e6, "MACs per sample (millions)"};
    if (max_figure >= 1e3) return {1e3, "MACs per sample (thousands)"};
    return {1, "MACs per sample"};
  }
  // Binary units, as HumanBytes writes them in the tables and the KPI boxes.
  const char* const units[] = {"B", "KiB", "MiB", "GiB"};
  double scale = 1;
  int u = 0;
  while (u < 3 && max_figure >= 1024 * scale) {
    scale *= 1024;
    ++u;
  }
  return {scale, std::string("parameter bytes (") + units[u] + ")"};
}

// A plotted point: its index in SearchReport::points and its position in axis units.
struct ParetoPoint {
  size_t index;
  double x, y;
  const SearchPointReport* p;
};

// Plot area and the axis ranges mapped onto it.
struct Frame {
  double x0, y0, w, h, xlo, xhi, ylo, yhi;
  double X(double v) const { return x0 + (v - xlo) / (xhi - xlo) * w; }
  double Y(double v) const { return y0 + h - (v - ylo) / (yhi - ylo) * h; }
};

// A tick label with as many decimals as the step needs to be exact: TickLabel writes the 2.5-steps
// NiceTicks can choose with too few (0.25, 0.5, 0.75 as "0.2", "0.5", "0.8").
std::string ExactTickLabel(double v, double step) {
  int decimals = 0;
  for (double scaled = step; decimals < 6 && std::fabs(scaled - std::round(scaled)) > 1e-6; scaled *= 10) ++decimals;
  if (std::fabs(v) < step * 1e-6) v = 0;  // no "-0"
  return Fixed(v, decimals);
}

std::string ParetoGrid(const Frame& f, const std::vector<double>& xt, const std::vector<double>& yt,
                       const std::string& x_title, const std::string& y_title, int H) {
  std::string svg;
  const double xstep = xt.size() > 1 ? xt[1] - xt[0] : 1, ystep = yt.size() > 1 ? yt[1] - yt[0] : 1;
  for (double t : yt) {
    const double y = f.Y(t);
    // The zero line is darker: points below it scored better than the original.
    svg += Line(f.x0, y, f.x0 + f.w, y, std::fabs(t) < ystep * 1e-6 ? "stroke=\"#cbd5e1\"" : "stroke=\"#e5e7eb\"");
    svg += Text(f.x0 - 6, y + 3.5, ExactTickLabel(t, ystep), "text-anchor=\"end\" fill=\"#6b7280\"");
  }
  for (double t : xt) {
    const double x = f.X(t);
    svg += Line(x, f.y0, x, f.y0 + f.h, "stroke=\"#f1f5f9\"");
    svg += Line(x, f.y0 + f.h, x, f.y0 + f.h + 4, "stroke=\"#9ca3af\"");
    svg += Text(x, f.y0 + f.h + 16, ExactTickLabel(t, xstep), "text-anchor=\"middle\" fill=\"#6b7280\"");
  }
  svg += Line(f.x0, f.y0 + f.h, f.x0 + f.w, f.y0 + f.h, "stroke=\"#9ca3af\"");
  svg += Line(f.x0, f.y0, f.x0, f.y0 + f.h, "stroke=\"#9ca3af\"");
  svg += Text(f.x0 + f.w / 2, H - 10, x_title, "text-anchor=\"middle\" fill=\"#374151\"");
  svg += Text(16, f.y0 + f.h / 2, y_title,
              "text-anchor=\"middle\" fill=\"#374151\" transform=\"rotate(-90 16 " + N(f.y0 + f.h / 2) + ")\"");
  return svg;
}

const char kWithin[] = "#16a34a", kOver[] = "#dc2626", kFrontier[] = "#2563eb", kBudget[] = "#b45309";

std::string PointTooltip(const SearchReport& s, const ParetoPoint& q) {
  const SearchPointReport& p = *q.p;
  std::string t = "#" + std::to_string(q.index + 1) + ": " + SearchFigureText(s, p) + ", drop " + Fixed(p.drop, 2) +
                  " pp (predicted " + Fixed(p.predicted_drop, 2) + " pp); " +
                  (p.within_budget ? "within budget" : "over budget");
  if (p.pareto) t += ", Pareto";
  if (p.chosen) t += ", chosen";
  if (p.finetuned) t += ", fine-tuned";
  return t + "\nhow: " + p.how + "\nconfig: " + p.config;
}

// The points (dominated ones faded), each with its index beside it.
std::string ParetoPoints(const SearchReport& s, const std::vector<ParetoPoint>& pts, const Frame& f) {
  std::string svg;
  const bool numbered = pts.size() <= 30;
  for (const ParetoPoint& q : pts) {
    const double cx = f.X(q.x), cy = f.Y(q.y);
    const char* color = q.p->within_budget ? kWithin : kOver;
    svg += "<circle class=\"pt " + std::string(q.p->within_budget ? "within" : "over") + "\" cx=\"" + N(cx) +
           "\" cy=\"" + N(cy) + "\" r=\"" + (q.p->pareto ? "4.5" : "3.5") + "\" fill=\"" + color + "\"" +
           (q.p->pareto ? " stroke=\"#fff\" stroke-width=\"1\"" : " fill-opacity=\"0.5\"") + "><title>" +
           HtmlEscape(PointTooltip(s, q)) + "</title></circle>";
    if (numbered && !q.p->chosen)
      svg += Text(cx + 5, cy - 5, std::to_string(q.index + 1), "fill=\"#6b7280\" font-size=\"9.5\"");
  }
  return svg;
}

// The chosen point's ring and two-line label. The label goes in whichever corner beside the ring
// covers the fewest other points, frontier segments and the budget line (frontier: the staircase's
// vertices in pixels; segments are horizontal or vertical), staying inside the plot.
std::string ChosenMarker(const SearchReport& s, const ParetoPoint& c, const std::vector<ParetoPoint>& pts,
                         const std::vector<std::pair<double, double>>& frontier, const Frame& f) {
  const double cx = f.X(c.x), cy = f.Y(c.y);
  std::string svg = "<circle class=\"chosen-ring\" cx=\"" + N(cx) + "\" cy=\"" + N(cy) +
                    "\" r=\"8.5\" fill=\"none\" stroke=\"#111827\" stroke-width=\"2\"><title>" +
                    HtmlEscape(PointTooltip(s, c)) + "</title></circle>";
  const std::string title = "chosen #" + std::to_string(c.index + 1);
  const std::string detail = SearchFigureText(s, *c.p) + " · " + Fixed(c.p->drop, 2) + " pp";
  const double width = 6.2 * static_cast<double>(std::max(DisplayWidth(title) + 1, DisplayWidth(detail)));
  const double by = f.Y(s.max_drop);
  // Candidates, in order of preference: below right, below left, above right, above left, then
  // the same a line further away (with a leader line to the ring).
  const double offsets[] = {20, -26, 46, -52};
  double best_tx = 0, best_ty = 0, best_cost = 1e300;
  bool best_left = false;
  for (int k = 0; k < 8; ++k) {
    const bool left = k % 2 == 1;
    const double tx = left ? cx - 11 : cx + 11, ty = cy + offsets[k / 2];
    const double x1 = left ? tx - width : tx, x2 = left ? tx : tx + width, y1 = ty - 10, y2 = ty + 16;
    double cost = 0;
    if (x1 < f.x0 || x2 > f.x0 + f.w || y1 < f.y0 || y2 > f.y0 + f.h) cost += 100;
    for (const ParetoPoint& q : pts) {
      const double px = f.X(q.x), py = f.Y(q.y);
      if (&q != &c && px > x1 - 5 && px < x2 + 5 && py > y1 - 5 && py < y2 + 5) cost += 10;
    }
    for (size_t i = 0; i + 1 < frontier.size(); ++i) {
      const std::pair<double, double>& a = frontier[i];
      const std::pair<double, double>& b = frontier[i + 1];
      if (std::max(a.first, b.first) > x1 && std::min(a.first, b.first) < x2 && std::max(a.second, b.second) > y1 &&
          std::min(a.second, b.second) < y2)
        cost += 5;
    }
    if (by > y1 && by < y2) cost += 3;
    if (cost < best_cost) best_cost = cost, best_tx = tx, best_ty = ty, best_left = left;
  }
  if (std::fabs(best_ty - cy) > 30) {
    const double sx = best_left ? -1 : 1, sy = best_ty > cy ? 1 : -1;
    svg += Line(cx + 6 * sx, cy + 6 * sy, best_tx - 2 * sx, best_ty + (sy > 0 ? -10 : 16),
                "stroke=\"#6b7280\" stroke-width=\"1\"");
  }
  // A white copy underneath keeps the label readable over grid lines (rather than paint-order,
  // which not every SVG renderer knows).
  const std::string anchor = best_left ? "text-anchor=\"end\"" : "text-anchor=\"start\"";
  const std::string halo = anchor + " fill=\"#fff\" stroke=\"#fff\" stroke-width=\"3\" stroke-linejoin=\"round\"";
  svg += Text(best_tx, best_ty, title, halo + " font-weight=\"600\"") + Text(best_tx, best_ty + 13, detail, halo);
  svg += Text(best_tx, best_ty, title, anchor + " font-weight=\"600\" fill=\"#111827\"");
  svg += Text(best_tx, best_ty + 13, detail, anchor + " fill=\"#374151\"");
  return svg;
}

std::string ParetoLegend(double lx, double ly) {
  std::string svg;
  auto dot = [&](const char* color, const std::string& extra, const std::string& label) {
    svg += "<circle cx=\"" + N(lx + 8) + "\" cy=\"" + N(ly - 4) + "\" r=\"4.5\" fill=\"" + color + "\"" + extra + "/>";
    svg += Text(lx + 20, ly, label, "fill=\"#374151\"");
    ly += 18;
  };
  dot(kWithin, "", "within budget");
  dot(kOver, "", "over budget");
  dot(kWithin, " fill-opacity=\"0.5\"", "faded: off the frontier");
  svg += Line(lx, ly - 4, lx + 16, ly - 4, "stroke=\"" + std::string(kFrontier) + "\" stroke-width=\"2\"");
  svg += Text(lx + 20, ly, "Pareto frontier", "fill=\"#374151\"");
  ly += 18;
  svg += Line(lx, ly - 4, lx + 16, ly - 4,
              "stroke=\"" + std::string(kBudget) + "\" stroke-width=\"1.5\" stroke-dasharray=\"5 4\"");
  svg += Text(lx + 20, ly, "budget (--max-drop)", "fill=\"#374151\"");
  ly += 18;
  svg += "<circle cx=\"" + N(lx + 8) + "\" cy=\"" + N(ly - 4) + "\" r=\"6\" fill=\"none\" stroke=\"#111827\" stroke-width=\"2\"/>";
  svg += Text(lx + 20, ly, "chosen configuration", "fill=\"#374151\"");
  return svg;
}

}  // namespace

std::string SearchFigureText(const SearchReport& s, const SearchPointReport& p) {
  const double v = PointFigure(s.target, p);
  if (!(v >= 0)) return "-";
  if (s.target == "latency") return Fixed(v, 3) + " ms";
  if (s.target == "macs") return Grouped(p.macs) + " MACs";
  return HumanBytes(p.param_bytes);
}

std::string ParetoSvg(const SearchReport& s) {
  std::vector<ParetoPoint> pts;
  double max_figure = 0;
  for (size_t i = 0; i < s.points.size(); ++i) {
    const double v = PointFigure(s.target, s.points[i]);
    if (!(v >= 0) || !std::isfinite(v) || !std::isfinite(s.points[i].drop)) continue;
    pts.push_back({i, v, s.points[i].drop, &s.points[i]});
    max_figure = std::max(max_figure, v);
  }
  if (pts.empty()) return "";
  const ParetoAxis axis = ParetoAxisFor(s, max_figure);
  double xmin = pts[0].x / axis.scale, xmax = xmin, ymin = std::min(0.0, s.max_drop), ymax = std::max(0.0, s.max_drop);
  for (ParetoPoint& q : pts) {
    q.x /= axis.scale;
    xmin = std::min(xmin, q.x);
    xmax = std::max(xmax, q.x);
    ymin = std::min(ymin, q.y);
    ymax = std::max(ymax, q.y);
  }
  // A little room so that the points (and the chosen ring) do not sit on the frame.
  const double xpad = 0.04 * (xmax - xmin), ypad = 0.04 * (ymax - ymin);
  const std::vector<double> xt = NiceTicks(std::max(0.0, xmin - xpad), xmax + xpad, 8);
  const std::vector<double> yt = NiceTicks(ymin < 0 ? ymin - ypad : ymin, ymax + ypad, 6);
  const int W = 880, H = 360, legend_w = 190;
  const Frame f{64, 20, W - 64.0 - legend_w - 20, H - 20.0 - 48, xt.front(), xt.back(), yt.front(), yt.back()};

  std::string svg = SvgOpen(W, H, "chart pareto", "measured " + s.metric + " drop versus " + s.target +
                                                      " for every configuration the search evaluated");
  svg += ParetoGrid(f, xt, yt, axis.title, "drop in " + s.metric + " (pp)", H);
  const double by = f.Y(s.max_drop);
  svg += Line(f.x0, by, f.x0 + f.w, by,
              "class=\"budget\" stroke=\"" + std::string(kBudget) + "\" stroke-width=\"1.5\" stroke-dasharray=\"5 4\"");
  svg += Text(f.x0 + f.w - 4, by - 5, "budget " + Fixed(s.max_drop, 2) + " pp",
              "text-anchor=\"end\" font-weight=\"600\" fill=\"" + std::string(kBudget) + "\"");

  // The frontier as a staircase: from each Pareto point along x to the next one's figure, then
  // down to its drop — the best drop reachable at each cost.
  std::vector<const ParetoPoint*> front;
  for (const ParetoPoint& q : pts)
    if (q.p->pareto) front.push_back(&q);
  std::sort(front.begin(), front.end(),
            [](const ParetoPoint* a, const ParetoPoint* b) { return a->x < b->x || (a->x == b->x && a->y < b->y); });
  std::vector<std::pair<double, double>> stairs;
  for (size_t k = 0; k < front.size(); ++k) {
    if (k > 0) stairs.emplace_back(f.X(front[k]->x), f.Y(front[k - 1]->y));
    stairs.emplace_back(f.X(front[k]->x), f.Y(front[k]->y));
  }
  if (stairs.size() >= 2) {
    std::string line;
    for (const auto& [x, y] : stairs) line += (line.empty() ? "" : " ") + N(x) + "," + N(y);
    svg += "<polyline class=\"frontier\" points=\"" + line + "\" fill=\"none\" stroke=\"" + kFrontier +
           "\" stroke-width=\"2\" stroke-linejoin=\"round\"/>";
  }
  svg += ParetoPoints(s, pts, f);
  for (const ParetoPoint& q : pts)
    if (q.p->chosen) {
      svg += ChosenMarker(s, q, pts, stairs, f);
      break;
    }
  svg += ParetoLegend(f.x0 + f.w + 24, f.y0 + 8);
  return svg + "</svg>";
}

}  // namespace whittle::report
