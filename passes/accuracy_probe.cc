#include "passes/accuracy_probe.h"

#include "runtime/evaluate.h"

namespace whittle {

StatusOr<Tensor> PredictTop1(const Session& session, const Tensor& inputs, int64_t batch_size) {
  if (session.inputs().empty() || session.outputs().empty())
    return InvalidArgument("model has no inputs or no outputs");
  const int64_t n = inputs.dim(0);
  Tensor pred(DType::kInt64, {n});
  for (int64_t b = 0; b < n; b += batch_size) {
    int64_t e = std::min(n, b + batch_size);
    WH_ASSIGN_OR_RETURN(std::vector<Tensor> out, session.Run({{session.inputs()[0].name, SliceBatch(inputs, b, e)}}));
    const Tensor& logits = out[0];
    if (logits.dtype() != DType::kFloat32 || logits.rank() != 2 || logits.dim(0) != e - b)
      return InvalidArgument("model output '" + session.outputs()[0].name + "' is not float [batch, classes]");
    const int64_t c = logits.dim(1);
    const float* p = logits.data<float>();
    for (int64_t i = 0; i < e - b; ++i) {
      int64_t best = 0;
      for (int64_t j = 1; j < c; ++j)
        if (p[i * c + j] > p[i * c + best]) best = j;
      pred.data<int64_t>()[b + i] = best;
    }
  }
  return pred;
}

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
    WH_ASSIGN_OR_RETURN(p.labels_, PredictTop1(*session, data.inputs));
  }
  WH_ASSIGN_OR_RETURN(p.baseline_, p.Measure(original));
  return p;
}

StatusOr<double> AccuracyProbe::Measure(const Graph& candidate) const {
  SessionOptions so;
  so.num_threads = num_threads_;
  WH_ASSIGN_OR_RETURN(auto session, Session::FromGraph(candidate, so));
  WH_ASSIGN_OR_RETURN(Tensor pred, PredictTop1(*session, data_->inputs));
  int64_t correct = 0;
  const int64_t n = pred.numel();
  for (int64_t i = 0; i < n; ++i) correct += pred.data<int64_t>()[i] == labels_.data<int64_t>()[i];
  return static_cast<double>(correct) / static_cast<double>(n);
}

}  // namespace whittle
