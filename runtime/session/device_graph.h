// CUDA graphs of a device session (SessionOptions::cuda_graphs): one input signature's graph and
// what its eager runs showed (DeviceGraph), the session's graphs by signature (DeviceGraphCache)
// and the per-signature report. Session::Impl::RunImpl decides when to capture; the replay is
// Session::Impl::ReplayGraph (device_graph.cc). Internal to runtime/session/.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "lib/ir/device.h"
#include "lib/ir/graph.h"
#include "runtime/session/arena_pool.h"

namespace whittle {

// One input signature's CUDA graph (SessionOptions::cuda_graphs): what its eager runs showed
// and, once captured, the graph with every buffer it reads or writes. All of it under mu, which a
// capture or replay holds throughout (the buffers are the graph's own, so replays take turns; a
// run that finds it busy runs eagerly).
struct DeviceGraph {
  std::mutex mu;
  std::string signature;  // the input dtypes and dims, for the report
  int eager_runs = 0;    // eager runs that could have been captured
  double eager_ms = 0;   // the fastest of those whose plan was reused (0: none yet)
  std::string eager_why;  // why it runs eagerly for good (empty: not decided)
  int failed_captures = 0;
  const DeviceRuntime* rt = nullptr;
  void* graph = nullptr;
  std::unique_ptr<RunArena> arena;             // every buffer the graph's kernels touch
  std::vector<std::pair<int, Tensor>> inputs;  // (graph input value, the device tensor the graph reads)
  std::vector<Tensor> outputs;                 // per graph output: where the graph leaves it
  std::unique_ptr<CaptureReleases> kept;       // buffers released while capturing: the work may read them
  int64_t replays = 0;
  double replay_ms = 0;  // the fastest replay

  void Drop() {
    if (graph) rt->drop_graph(graph);
    graph = nullptr;
    inputs.clear();
    outputs.clear();
    arena.reset();
    kept.reset();
  }
  ~DeviceGraph() { Drop(); }
};

// CUDA graphs (SessionOptions::cuda_graphs), what Run and device_graph.cc share.
inline constexpr int kEagerRunsBeforeCapture = 3;  // the first records the plan and fills kernel caches
// Captures tried before a signature runs eagerly for good: a synchronisation on another thread's
// stream can spoil a capture on the same GPU, which the next attempt may not meet.
inline constexpr int kCaptureAttempts = 2;

// The session's graphs, one per input signature (at most kMaxPlans); thread-safe.
class DeviceGraphCache {
 public:
  // key's graph (made on first sight while there is room), with *lock holding its mu; null when
  // there is no room, or when a replay or capture holds it (that run is eager, uncounted).
  std::shared_ptr<DeviceGraph> Claim(const std::string& key, std::unique_lock<std::mutex>* lock) const;
  // Session::device_graph_report.
  std::vector<std::string> Report() const;

 private:
  mutable std::mutex mu_;
  mutable std::map<std::string, std::shared_ptr<DeviceGraph>> graphs_;  // key: as PlanCache's
};

// "float32[1,1,28,28], int64[1,12]": the fed inputs' dtypes and dims, for the report.
std::string SignatureText(const Graph& g, const std::map<std::string, Tensor>& inputs);

}  // namespace whittle
