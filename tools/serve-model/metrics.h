// serve-model's counters and their Prometheus text form (GET /metrics, exposition format 0.0.4):
// predict requests and errors by model and HTTP code, every HTTP answer by code, request latency
// (a histogram and p50/p90/p99 over the last requests), reloads, and per model what the
// BatchingSession reports (queue depth, batches, rows per batch as a histogram, refusals).
// Model labels are only the served models' names (an unknown name counts as "_unknown"), so a
// client cannot grow the label set. Record* are thread-safe and cheap (one short lock).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "tools/serve-model/model_registry.h"
#include "whittle/batching_session.h"

namespace whittle::serve {

class Metrics {
 public:
  explicit Metrics(std::vector<std::string> models);

  // A predict request to model index `model` (-1: a name not served) answered `code` after
  // `seconds`; `rows` of them ran (the batch axis of its inputs; 0 when it did not run).
  void RecordPredict(int model, int code, double seconds, int64_t rows);
  // Any HTTP answer (every endpoint, and the library's own 400/413/414).
  void RecordHttp(int code);
  void RecordReload(int model, bool ok);
  void AddInFlight(int delta) { in_flight_.fetch_add(delta, std::memory_order_relaxed); }

  // The text for GET /metrics; stats[i] is model i's (ModelRegistry::Stats).
  std::string Render(const std::vector<ModelStats>& stats) const;

  // Latency buckets (seconds), shared with the load tool's report.
  static const std::vector<double>& LatencyBuckets();

 private:
  struct PerModel {
    std::map<int, int64_t> by_code;
    std::vector<int64_t> latency_buckets;  // non-cumulative; last is +Inf
    double latency_sum = 0;
    int64_t latency_count = 0;
    std::vector<double> recent;  // ring of the last kRecent latencies
    size_t recent_next = 0;
    int64_t rows = 0;
    int64_t reloads_ok = 0, reloads_failed = 0;
  };
  static constexpr size_t kRecent = 4096;

  std::vector<std::string> names_;
  mutable std::mutex mu_;
  std::vector<PerModel> per_model_;  // names_.size() + 1 (the last: "_unknown")
  std::map<int, int64_t> http_by_code_;
  std::atomic<int64_t> in_flight_{0};
};

}  // namespace whittle::serve
