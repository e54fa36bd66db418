#include "tools/serve-model/metrics.h"

#include <algorithm>
#include <cstdio>

namespace whittle::serve {
namespace {

std::string Num(double v) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

void Header(std::string* out, const char* name, const char* type, const char* help) {
  *out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

}  // namespace

const std::vector<double>& Metrics::LatencyBuckets() {
  static const std::vector<double> kBuckets = {0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05,
                                               0.1,    0.2,   0.5,   1,     2,    5,    10};
  return kBuckets;
}

Metrics::Metrics(std::vector<std::string> models) : names_(std::move(models)), per_model_(names_.size() + 1) {
  for (PerModel& m : per_model_) {
    m.latency_buckets.assign(LatencyBuckets().size() + 1, 0);
    m.recent.reserve(kRecent);
  }
}

void Metrics::RecordPredict(int model, int code, double seconds, int64_t rows) {
  const size_t i = model >= 0 && static_cast<size_t>(model) < names_.size() ? static_cast<size_t>(model) : names_.size();
  const auto& b = LatencyBuckets();
  const size_t bucket = static_cast<size_t>(std::lower_bound(b.begin(), b.end(), seconds) - b.begin());
  std::lock_guard<std::mutex> lock(mu_);
  PerModel& m = per_model_[i];
  ++m.by_code[code];
  ++m.latency_buckets[bucket];
  m.latency_sum += seconds;
  ++m.latency_count;
  m.rows += rows;
  if (m.recent.size() < kRecent) {
    m.recent.push_back(seconds);
  } else {
    m.recent[m.recent_next] = seconds;
    m.recent_next = (m.recent_next + 1) % kRecent;
  }
}

void Metrics::RecordHttp(int code) {
  std::lock_guard<std::mutex> lock(mu_);
  ++http_by_code_[code];
}

void Metrics::RecordReload(int model, bool ok) {
  if (model < 0 || static_cast<size_t>(model) >= names_.size()) return;
  std::lock_guard<std::mutex> lock(mu_);
  ++(ok ? per_model_[static_cast<size_t>(model)].reloads_ok : per_model_[static_cast<size_t>(model)].reloads_failed);
}

std::string Metrics::Render(const std::vector<ModelStats>& model_stats) const {
  std::vector<BatchingStats> stats;
  for (const ModelStats& m : model_stats) stats.push_back(m.batching);
  std::vector<PerModel> pm;
  std::map<int, int64_t> http;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pm = per_model_;
    http = http_by_code_;
  }
  auto label = [&](size_t i) { return "model=\"" + (i < names_.size() ? names_[i] : std::string("_unknown")) + "\""; };
  std::string out;
  Header(&out, "whittle_requests_total", "counter", "Predict requests answered, by model and HTTP status code.");
  for (size_t i = 0; i < pm.size(); ++i)
    for (const auto& [code, n] : pm[i].by_code)
      out += "whittle_requests_total{" + label(i) + ",code=\"" + std::to_string(code) + "\"} " + std::to_string(n) + "\n";
  Header(&out, "whittle_request_errors_total", "counter", "Predict requests answered with a 4xx or 5xx code.");
  for (size_t i = 0; i < pm.size(); ++i)
    for (const auto& [code, n] : pm[i].by_code)
      if (code >= 400)
        out += "whittle_request_errors_total{" + label(i) + ",code=\"" + std::to_string(code) + "\"} " +
               std::to_string(n) + "\n";
  Header(&out, "whittle_http_responses_total", "counter", "HTTP responses of every endpoint, by status code.");
  for (const auto& [code, n] : http)
    out += "whittle_http_responses_total{code=\"" + std::to_string(code) + "\"} " + std::to_string(n) + "\n";
  Header(&out, "whittle_in_flight_requests", "gauge", "Requests being handled now.");
  out += "whittle_in_flight_requests " + std::to_string(in_flight_.load(std::memory_order_relaxed)) + "\n";

  Header(&out, "whittle_request_duration_seconds", "histogram",
         "Predict request latency, from the handler's start (body read included) to the response.");
  const auto& b = LatencyBuckets();
  for (size_t i = 0; i < pm.size(); ++i) {
    if (pm[i].latency_count == 0 && i == names_.size()) continue;
    int64_t cum = 0;
    for (size_t k = 0; k <= b.size(); ++k) {
      cum += pm[i].latency_buckets[k];
      out += "whittle_request_duration_seconds_bucket{" + label(i) + ",le=\"" + (k < b.size() ? Num(b[k]) : "+Inf") +
             "\"} " + std::to_string(cum) + "\n";
    }
    out += "whittle_request_duration_seconds_sum{" + label(i) + "} " + Num(pm[i].latency_sum) + "\n";
    out += "whittle_request_duration_seconds_count{" + label(i) + "} " + std::to_string(pm[i].latency_count) + "\n";
  }
  Header(&out, "whittle_request_latency_seconds", "summary",
         "Predict request latency quantiles over the last 4096 requests of each model.");
  for (size_t i = 0; i < names_.size(); ++i) {
    std::vector<double> r = pm[i].recent;
    std::sort(r.begin(), r.end());
    for (double q : {0.5, 0.9, 0.99}) {
      const double v = r.empty() ? 0.0 : r[std::min(r.size() - 1, static_cast<size_t>(q * static_cast<double>(r.size())))];
      out += "whittle_request_latency_seconds{" + label(i) + ",quantile=\"" + Num(q) + "\"} " + Num(v) + "\n";
    }
    out += "whittle_request_latency_seconds_sum{" + label(i) + "} " + Num(pm[i].latency_sum) + "\n";
    out += "whittle_request_latency_seconds_count{" + label(i) + "} " + std::to_string(pm[i].latency_count) + "\n";
  }

  Header(&out, "whittle_queue_depth", "gauge", "Requests waiting in the model's batching queue.");
  for (size_t i = 0; i < names_.size() && i < stats.size(); ++i)
    out += "whittle_queue_depth{" + label(i) + "} " + std::to_string(stats[i].queue_depth) + "\n";
  Header(&out, "whittle_batch_rows", "histogram", "Rows per batch run (dynamic batching; 1 without it).");
  for (size_t i = 0; i < names_.size() && i < stats.size(); ++i) {
    int64_t cum = 0;
    const std::vector<int64_t>& rows = stats[i].batch_rows;
    for (size_t k = 0; k < rows.size(); ++k) {
      cum += rows[k];
      out += "whittle_batch_rows_bucket{" + label(i) + ",le=\"" + std::to_string(int64_t{1} << k) + "\"} " +
             std::to_string(cum) + "\n";
    }
    out += "whittle_batch_rows_bucket{" + label(i) + ",le=\"+Inf\"} " + std::to_string(stats[i].batches) + "\n";
    out += "whittle_batch_rows_sum{" + label(i) + "} " + std::to_string(pm[i].rows) + "\n";
    out += "whittle_batch_rows_count{" + label(i) + "} " + std::to_string(stats[i].batches) + "\n";
  }
  struct Counter {
    const char* name;
    const char* help;
    int64_t BatchingStats::*field;
  };
  const Counter counters[] = {
      {"whittle_batches_total", "Session runs made by the batching queue.", &BatchingStats::batches},
      {"whittle_batching_accepted_total", "Requests the batching queue accepted.", &BatchingStats::requests},
      {"whittle_batching_rejected_total", "Requests refused because the queue was full or shutting down (503).",
       &BatchingStats::rejected},
      {"whittle_batching_expired_total", "Requests whose deadline passed while queued (504).", &BatchingStats::expired},
      {"whittle_batching_failed_total", "Requests whose batch's run failed.", &BatchingStats::failed},
  };
  for (const Counter& c : counters) {
    Header(&out, c.name, "counter", c.help);
    for (size_t i = 0; i < names_.size() && i < stats.size(); ++i)
      out += std::string(c.name) + "{" + label(i) + "} " + std::to_string(stats[i].*c.field) + "\n";
  }
  Header(&out, "whittle_unbatched_runs_total", "counter",
         "Requests run alone outside the batching queue (inputs without one common batch axis).");
  for (size_t i = 0; i < names_.size() && i < model_stats.size(); ++i)
    out += "whittle_unbatched_runs_total{" + label(i) + "} " + std::to_string(model_stats[i].direct_runs) + "\n";
  Header(&out, "whittle_model_reloads_total", "counter", "Model reloads (SIGHUP or :reload), by result.");
  for (size_t i = 0; i < names_.size(); ++i) {
    out += "whittle_model_reloads_total{" + label(i) + ",result=\"ok\"} " + std::to_string(pm[i].reloads_ok) + "\n";
    out += "whittle_model_reloads_total{" + label(i) + ",result=\"error\"} " + std::to_string(pm[i].reloads_failed) + "\n";
  }
  return out;
}

}  // namespace whittle::serve
