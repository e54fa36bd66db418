// How the accuracy-aware search scores a model on a data set, in percent, against the original:
// top1 (accuracy against the data's labels), top1-agreement (the share of predictions — per
// position for a sequence output such as a CTC recognizer's or a detector's — whose top-1 equals
// the original model's), cosine (mean per-sample cosine of the first output with the original's,
// x100), top1-sequence (the share of samples whose top-1 equals the original's at every position)
// or mse (100 x (1 - the first output's squared error relative to the original's energy)).
// The original scores its baseline (100 for the last three); a drop is baseline - score, in
// percentage points. Every score also gives `flips`: the share of top-1 predictions that changed.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "lib/data/dataset.h"
#include "lib/ir/graph.h"
#include "lib/ir/status.h"
#include "whittle/tensor.h"

namespace whittle::search {

enum class MetricKind { kTop1, kAgreement, kSequence, kCtc, kCosine, kMse };

// "top1", "top1-agreement", "top1-sequence" (the share of samples whose top-1 equals the
// original's at every position: a CTC recognizer whose argmax path is unchanged reads the same
// line, so a drop of P pp changes at most P % of the lines), "top1-ctc" (the share of samples
// whose greedy CTC decoding — top-1 per position, repeats merged, class 0 as the blank — equals the
// original's: the lines a recognizer reads that stay the same), "cosine", "mse".
// "top1-ctc:ignore=C1,C2,..." also drops those classes from both decoded lines before they are
// compared (PaddleOCR's recognition metric ignores the space class, for one).
struct Metric {
  MetricKind kind = MetricKind::kAgreement;
  std::vector<int64_t> ignore;  // top1-ctc: classes removed from the decoded lines
  Metric() = default;
  Metric(MetricKind k) : kind(k) {}  // NOLINT: a plain kind is a metric without options
  std::string Name() const;          // as parsed: "top1-ctc:ignore=6624"
};
StatusOr<Metric> ParseMetric(const std::string& spec);
const char* MetricName(MetricKind kind);

struct Score {
  double value = 0;  // percent
  double flips = 0;  // percent of top-1 predictions that differ from the original's
};

class Scorer {
 public:
  // data must outlive the scorer; kTop1 needs labels.
  static StatusOr<Scorer> Make(const Graph& original, const Dataset& data, const Metric& metric, int threads);
  StatusOr<Score> Measure(const Graph& candidate) const;
  double baseline() const { return baseline_; }
  MetricKind kind() const { return kind_; }

 private:
  const Dataset* data_ = nullptr;
  MetricKind kind_ = MetricKind::kAgreement;
  std::vector<int64_t> ignore_;               // top1-ctc classes dropped from decoded lines
  int threads_ = 1;
  Tensor reference_top1_;                     // the original's predictions
  std::shared_ptr<std::vector<float>> ref_;   // the original's first output (cosine, mse)
  int64_t row_ = 0;                           // its values per sample
  double baseline_ = 100;
};

}  // namespace whittle::search
