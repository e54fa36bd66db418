// Activation range calibration for --int8: streams the calibration data through a Session
// built from a copy of the graph whose outputs are the tensors to observe, with bounded memory.
// Pass 1 keeps a running min/max per tensor; for percentile/entropy/mse a second pass fills
// fixed-size histograms (2048 bins) of each side of zero (and of |x| for symmetric int8), and
// the range is chosen from them. No activation batch outlives its step.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "lib/data/dataset.h"
#include "lib/ir/graph.h"
#include "passes/pass.h"

namespace whittle::quant {

enum class CalibMethod { kMinMax, kPercentile, kEntropy, kMse };

struct CalibConfig {
  CalibMethod method = CalibMethod::kMinMax;
  double percentile = 99.99;  // kPercentile: fraction (in %) of each side's values kept inside
  int bins = 2048;
  int64_t batch = 256;
  bool symmetric = false;  // int8 activations: one threshold for |x|
};

const char* CalibMethodName(CalibMethod m);

// Observed and chosen range of one tensor.
struct TensorRange {
  float min = 0, max = 0;  // observed over all samples
  float lo = 0, hi = 0;    // chosen (lo <= 0 <= hi)
  double clipped = 0;      // fraction of the observed values outside [lo, hi] (histogram bins)
};

// Fraction of the count in the bins at or beyond threshold t (as ChooseThreshold returns it).
double CountBeyond(const std::vector<double>& counts, double limit, double t);

// Threshold on a one-sided histogram: counts[i] covers [i, i+1) * limit / counts.size() of |x|.
// levels is the number of quantization steps available on that side (255 for a non-negative
// uint8 tensor, 127/128 when a sign is shared). Returns a value in (0, limit].
double ChooseThreshold(const std::vector<double>& counts, double limit, CalibMethod method, double percentile,
                       int levels);

// Ranges of `values` (float32 value ids of g) over `data`. Progress goes to ctx.Progress with
// the stage "int8: calibration ...".
StatusOr<std::map<int, TensorRange>> CalibrateRanges(const Graph& g, const std::vector<int>& values, const Dataset& data,
                                                     const CalibConfig& cfg, const PassContext& ctx);

}  // namespace whittle::quant
