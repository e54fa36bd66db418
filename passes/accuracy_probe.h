// AccuracyProbe: measures how well a candidate graph does on calibration data, for passes that
// choose per-layer settings by sensitivity (AIMET-style) and for the CLI's before/after figures.
// Accuracy is top-1 against the dataset's labels when it has them, otherwise agreement with the
// original model's top-1 (so unlabeled calibration data still ranks layers); for a sequence
// output ([batch, positions, classes]: a decoder's logits) it counts top-1 per position.
#pragma once

#include <memory>

#include "lib/data/dataset.h"
#include "lib/ir/graph.h"
#include "runtime/evaluate.h"  // PredictTop1
#include "whittle/session.h"

namespace whittle {

class AccuracyProbe {
 public:
  // original: the reference graph (used for labels when data has none); data must outlive the
  // probe. Evaluates with `num_threads` intra-op threads.
  static StatusOr<AccuracyProbe> Make(const Graph& original, const Dataset& data, int num_threads = 1);
  // Fraction in [0, 1].
  StatusOr<double> Measure(const Graph& candidate) const;
  double baseline() const { return baseline_; }

 private:
  const Dataset* data_ = nullptr;
  Tensor labels_;
  int num_threads_ = 1;
  double baseline_ = 0;
};

}  // namespace whittle
