// Inline SVG charts for the HTML report: a singular-value spectrum (log y, the chosen rank
// marked) and accuracy-vs-compression curves (one line per layer, legend). Pure functions of
// the report data that return an <svg> element as text; every label is HTML-escaped and the
// only URL in the output is the SVG namespace.
#pragma once

#include <string>
#include <vector>

#include "passes/pass.h"

namespace whittle::report {

// "Nice" tick positions (1, 2 or 5 times a power of ten) covering [lo, hi], about `count` of them.
std::vector<double> NiceTicks(double lo, double hi, int count);

// The layer's spectrum; marks l.setting as the chosen rank unless the layer was skipped.
// Empty string when l.spectrum is empty.
std::string SpectrumSvg(const LayerReport& l);

// Accuracy vs. fraction of MACs removed for every layer of `pass` with a sensitivity curve;
// the point at each layer's chosen setting is ringed. Empty string when no layer has one.
std::string SensitivitySvg(const PassReport& pass);

}  // namespace whittle::report
