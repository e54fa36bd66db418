#include "passes/accuracy_probe.h"

#include "runtime/evaluate.h"

namespace whittle {

StatusOr<AccuracyProbe> AccuracyProbe::Make(const Graph& original, const Dataset& data, int num_threads) {
  if (data.size() == 0) return InvalidArgument("calibration data '" + data.description + "' is empty");
  AccuracyProbe p;
  p.data_ = &data;
  p.num_threads_ = num_threads;
  if (data.has_labels()) {
    p.labels_ = data.labels;
  } else {
    SessionOptions so;
    so.num_threads = num_threads;
    WH_ASSIGN_OR_RETURN(auto session, Session::FromGraph(original, so));
    WH_ASSIGN_OR_RETURN(p.labels_, PredictTop1(*session, data));
  }
  WH_ASSIGN_OR_RETURN(p.baseline_, p.Measure(original));
  return p;
}

StatusOr<double> AccuracyProbe::Measure(const Graph& candidate) const {
  SessionOptions so;
  so.num_threads = num_threads_;
  WH_ASSIGN_OR_RETURN(auto session, Session::FromGraph(candidate, so));
  WH_ASSIGN_OR_RETURN(Tensor pred, PredictTop1(*session, *data_));
  WH_ASSIGN_OR_RETURN(EvalResult r, CompareTop1(pred, labels_));
  return r.accuracy;
}

}  // namespace whittle
