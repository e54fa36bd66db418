#include "passes/search/metric.h"

#include <algorithm>
#include <cmath>

#include "runtime/evaluate.h"
#include "whittle/session.h"

namespace whittle::search {
namespace {

StatusOr<std::unique_ptr<Session>> Open(const Graph& g, int threads) {
  SessionOptions so;
  so.num_threads = threads;
  return Session::FromGraph(g, so);
}

// The first output's values for every sample of data, row after row (row values per sample).
StatusOr<std::vector<float>> FirstOutput(const Session& s, const Dataset& data, int64_t* row) {
  if (data.calls) return InvalidArgument("--metric cosine|mse compares outputs batch by batch; calls: data is not supported");
  std::vector<float> out;
  const int64_t n = data.size(), batch = DataBatch(data, 256, &s.inputs());
  for (int64_t b = 0; b < n; b += batch) {
    const int64_t e = std::min(n, b + batch);
    WH_ASSIGN_OR_RETURN(auto feeds, BatchFeeds(data, s.inputs(), b, e));
    WH_ASSIGN_OR_RETURN(std::vector<Tensor> outs, s.Run(feeds));
    if (outs.empty() || outs[0].dtype() != DType::kFloat32 || outs[0].rank() < 1 || outs[0].dim(0) < e - b)
      return InvalidArgument("--metric cosine|mse needs a float32 first output with the batch on its first axis");
    const int64_t r = outs[0].numel() / outs[0].dim(0);
    if (b == 0) *row = r;
    if (r != *row) return InvalidArgument("--metric cosine|mse: the first output's size per sample changes between batches");
    const float* p = outs[0].data<float>();
    out.insert(out.end(), p, p + (e - b) * r);
  }
  return out;
}

// Greedy CTC decoding of one sample's top-1 path: repeats merged, then the blank (class 0) and
// the ignored classes (sorted) dropped.
std::vector<int64_t> CtcDecode(const int64_t* path, int64_t n, const std::vector<int64_t>& ignore) {
  std::vector<int64_t> out;
  for (int64_t t = 0; t < n; ++t)
    if (path[t] != 0 && (t == 0 || path[t] != path[t - 1]) &&
        !std::binary_search(ignore.begin(), ignore.end(), path[t]))
      out.push_back(path[t]);
  return out;
}

}  // namespace

StatusOr<Metric> ParseMetric(const std::string& spec) {
  const size_t colon = spec.find(':');
  const std::string name = spec.substr(0, colon);
  Metric m;
  if (name == "top1") m.kind = MetricKind::kTop1;
  else if (name == "top1-agreement" || name == "agreement") m.kind = MetricKind::kAgreement;
  else if (name == "top1-sequence") m.kind = MetricKind::kSequence;
  else if (name == "top1-ctc") m.kind = MetricKind::kCtc;
  else if (name == "cosine") m.kind = MetricKind::kCosine;
  else if (name == "mse") m.kind = MetricKind::kMse;
  else
    return InvalidArgument("--metric: unknown metric '" + name +
                           "' (top1, top1-agreement, top1-sequence, top1-ctc[:ignore=C,...], cosine, mse)");
  if (colon == std::string::npos) return m;
  const std::string opts = spec.substr(colon + 1);
  if (m.kind != MetricKind::kCtc || opts.rfind("ignore=", 0) != 0)
    return InvalidArgument("--metric " + spec + ": only top1-ctc takes an option, ignore=C1,C2,... (class indices)");
  const std::string list = opts.substr(7);
  size_t at = 0;
  while (at <= list.size()) {
    const size_t comma = std::min(list.find(',', at), list.size());
    const std::string item = list.substr(at, comma - at);
    int64_t c = 0;
    size_t used = 0;
    try {
      c = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || c <= 0)
      return InvalidArgument("--metric " + spec + ": ignore= takes class indices > 0 (0 is the blank), not '" + item + "'");
    m.ignore.push_back(c);
    at = comma + 1;
  }
  std::sort(m.ignore.begin(), m.ignore.end());
  m.ignore.erase(std::unique(m.ignore.begin(), m.ignore.end()), m.ignore.end());
  return m;
}

std::string Metric::Name() const {
  std::string s = MetricName(kind);
  for (size_t i = 0; i < ignore.size(); ++i) s += (i ? "," : ":ignore=") + std::to_string(ignore[i]);
  return s;
}

const char* MetricName(MetricKind kind) {
  switch (kind) {
    case MetricKind::kTop1: return "top1";
    case MetricKind::kAgreement: return "top1-agreement";
    case MetricKind::kSequence: return "top1-sequence";
    case MetricKind::kCtc: return "top1-ctc";
    case MetricKind::kCosine: return "cosine";
    case MetricKind::kMse: return "mse";
  }
  return "?";
}

StatusOr<Scorer> Scorer::Make(const Graph& original, const Dataset& data, const Metric& metric, int threads) {
  const MetricKind kind = metric.kind;
  if (kind == MetricKind::kTop1 && !data.has_labels())
    return InvalidArgument("--metric top1 needs labelled data (without labels use top1-agreement, cosine or mse)");
  if (data.size() == 0) return InvalidArgument("the search's data is empty");
  Scorer s;
  s.data_ = &data;
  s.kind_ = kind;
  s.ignore_ = metric.ignore;
  std::sort(s.ignore_.begin(), s.ignore_.end());
  s.threads_ = threads;
  WH_ASSIGN_OR_RETURN(auto session, Open(original, threads));
  WH_ASSIGN_OR_RETURN(s.reference_top1_, PredictTop1(*session, data));
  if (kind == MetricKind::kTop1) {
    WH_ASSIGN_OR_RETURN(EvalResult r, CompareTop1(s.reference_top1_, data.labels));
    s.baseline_ = 100 * r.accuracy;
  }
  if (kind == MetricKind::kCosine || kind == MetricKind::kMse) {
    WH_ASSIGN_OR_RETURN(std::vector<float> ref, FirstOutput(*session, data, &s.row_));
    s.ref_ = std::make_shared<std::vector<float>>(std::move(ref));
  }
  return s;
}

StatusOr<Score> Scorer::Measure(const Graph& candidate) const {
  WH_ASSIGN_OR_RETURN(auto session, Open(candidate, threads_));
  WH_ASSIGN_OR_RETURN(Tensor pred, PredictTop1(*session, *data_));
  WH_ASSIGN_OR_RETURN(EvalResult agree, CompareTop1(pred, reference_top1_));
  Score s;
  s.flips = 100 * (1 - agree.accuracy);
  switch (kind_) {
    case MetricKind::kTop1: {
      WH_ASSIGN_OR_RETURN(EvalResult r, CompareTop1(pred, data_->labels));
      s.value = 100 * r.accuracy;
      break;
    }
    case MetricKind::kAgreement: s.value = 100 * agree.accuracy; break;
    case MetricKind::kSequence:
    case MetricKind::kCtc: {
      const int64_t n = pred.dim(0), per = n ? pred.numel() / n : 0;
      if (pred.dtype() != DType::kInt64 || pred.dims() != reference_top1_.dims())
        return Internal(std::string(MetricName(kind_)) + ": predictions of another shape than the original's");
      const int64_t* a = pred.data<int64_t>();
      const int64_t* b = reference_top1_.data<int64_t>();
      int64_t same = 0;
      for (int64_t i = 0; i < n; ++i)
        same += kind_ == MetricKind::kCtc ? CtcDecode(a + i * per, per, ignore_) == CtcDecode(b + i * per, per, ignore_)
                                          : std::equal(a + i * per, a + (i + 1) * per, b + i * per);
      s.value = n ? 100.0 * static_cast<double>(same) / static_cast<double>(n) : 100;
      break;
    }
    case MetricKind::kCosine:
    case MetricKind::kMse: {
      int64_t row = 0;
      WH_ASSIGN_OR_RETURN(std::vector<float> out, FirstOutput(*session, *data_, &row));
      if (row != row_ || out.size() != ref_->size())
        return InvalidArgument("the compressed model's first output has " + std::to_string(row) +
                               " values per sample, the original's " + std::to_string(row_));
      const std::vector<float>& ref = *ref_;
      if (kind_ == MetricKind::kMse) {
        double err = 0, energy = 0;
        for (size_t i = 0; i < ref.size(); ++i) {
          const double d = static_cast<double>(out[i]) - ref[i];
          err += d * d;
          energy += static_cast<double>(ref[i]) * ref[i];
        }
        s.value = 100 * (1 - (energy > 0 ? err / energy : err));
      } else {
        double sum = 0;
        const size_t n = ref.size() / static_cast<size_t>(std::max<int64_t>(1, row));
        for (size_t k = 0; k < n; ++k) {
          double ab = 0, aa = 0, bb = 0;
          for (int64_t j = 0; j < row; ++j) {
            const double a = out[k * row + j], b = ref[k * row + j];
            ab += a * b, aa += a * a, bb += b * b;
          }
          sum += aa > 0 && bb > 0 ? ab / std::sqrt(aa * bb) : (aa == bb ? 1 : 0);
        }
        s.value = 100 * (n ? sum / n : 1);
      }
      break;
    }
  }
  return s;
}

}  // namespace whittle::search
