// Inline SVG charts for the HTML reports: a singular-value spectrum (log y, the chosen rank
// marked), accuracy-vs-compression curves (one line per layer, legend), a plain line chart
// of figures per epoch (the fine-tuning reports) and the accuracy-aware search's scatter of
// cost against accuracy drop with its Pareto frontier. Pure functions of
// the report data that return an <svg> element as text; every label is HTML-escaped and the
// only URL in the output is the SVG namespace.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "passes/pass.h"

namespace whittle {
struct SearchReport;
struct SearchPointReport;
}  // namespace whittle

namespace whittle::report {

// "Nice" tick positions (1, 2 or 5 times a power of ten) covering [lo, hi], about `count` of them.
std::vector<double> NiceTicks(double lo, double hi, int count);

// The layer's spectrum; marks l.setting as the chosen rank unless the layer was skipped.
// Empty string when l.spectrum is empty.
std::string SpectrumSvg(const LayerReport& l);

// Accuracy vs. fraction of MACs removed for every layer of `pass` with a sensitivity curve;
// the point at each layer's chosen setting is ringed. Empty string when no layer has one.
std::string SensitivitySvg(const PassReport& pass);

// One line of a LineChartSvg: (x, y) points in x order; a dashed line without dots when `reference`
// (e.g. the teacher's accuracy, drawn across the chart).
struct LineSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;
  bool reference = false;
};

// Lines over an integer x axis (epochs), a dot with a tooltip at every point of a non-reference
// series, and a legend when there is more than one series. `cls` is added to the svg's classes,
// `label` is its accessible name; y_digits is the precision of the tooltips. Empty string when
// no series has a point.
std::string LineChartSvg(const std::string& cls, const std::string& label, const std::string& x_title,
                         const std::string& y_title, const std::vector<LineSeries>& series, int y_digits);

// Every configuration the search evaluated: x = the target's figure (parameter bytes in
// B/KiB/MiB/GiB for "size", MACs for "macs", milliseconds for "latency"), y = the measured drop in
// pp. One circle (class "pt", then "within" or "over" the budget) with a tooltip per point that
// has a figure; the Pareto points joined by a step line, the budget (max_drop) as a dashed line,
// the chosen point ringed and labelled. Empty string when no point has a figure to plot.
std::string ParetoSvg(const SearchReport& s);
// A search point's figure for the target as the chart and the search tables write it:
// "1.2 MiB", "12,345,678 MACs", "3.141 ms"; "-" when it was not measured.
std::string SearchFigureText(const SearchReport& s, const SearchPointReport& p);

}  // namespace whittle::report
