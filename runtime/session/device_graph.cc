// CUDA graphs of a device session (SessionOptions::cuda_graphs): the graphs by signature, a
// captured signature's replay and the per-signature report. RunImpl (run.cc) decides when to
// capture; docs/design-notes.md says why the session, not the backend, captures.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "runtime/session/device_graph.h"
#include "runtime/session/output_binding.h"
#include "runtime/session/plan_cache.h"
#include "runtime/session/session_impl.h"

namespace whittle {
namespace {

constexpr int kReplaysToJudge = 5;       // replays before a graph must have paid
constexpr double kGraphMustSave = 0.95;  // of the eager time, or the graph is dropped

}  // namespace

std::string SignatureText(const Graph& g, const std::map<std::string, Tensor>& inputs) {
  std::string s;
  for (int id : g.inputs()) {
    auto it = inputs.find(g.value(id).name);
    if (it == inputs.end()) continue;
    if (!s.empty()) s += ", ";
    s += std::string(DTypeName(it->second.dtype())) + DimsToString(it->second.dims());
  }
  return s;
}

// The inputs copied into the graph's, one launch, the outputs copied back to the host, and what
// the graph's kernels reported on the device.
StatusOr<std::vector<Tensor>> Session::Impl::ReplayGraph(DeviceGraph& dg, const std::map<std::string, Tensor>& inputs,
                                                         std::chrono::steady_clock::time_point t_start,
                                                         std::vector<Tensor>* into) const {
  const Graph& g = graph_;
  // Queued: the launch follows the copies without a wait, and the copies out wait for both. The
  // caller holds its inputs until this returns, so a page-locked one is read by the device
  // directly; every way out waits for the device first.
  Status st = Status::Ok();
  for (auto& [id, dev] : dg.inputs) {
    const Tensor& x = inputs.at(g.value(id).name);
    if (st.ok()) st = QueueTensorBytes(x, &dev, x.buffer()->page_locked());
  }
  if (st.ok()) st = dg.rt->replay(dg.graph);
  if (st.ok() && dg.arena->check.defined()) QueueCheckReportDownload(dg.arena->check);  // comes with the wait
  std::vector<Tensor> results;
  bool queued = false;  // RunInto's outputs queued down into page-locked memory
  if (st.ok() && into) {
    std::vector<const Tensor*> produced;
    for (const Tensor& t : dg.outputs) produced.push_back(&t);
    st = WriteOutputsInto(g, produced, *into, &queued);
  } else {
    for (const Tensor& t : dg.outputs) {
      if (!st.ok()) break;
      auto h = t.ToDevice(DeviceType::kCpu);  // waits for the graph; its error surfaces here
      if (!h.ok()) st = h.status();
      else results.push_back(std::move(*h));
    }
  }
  if (queued && st.ok()) st = dg.rt->synchronize();  // the graph, then the outputs' copies down
  else if (!st.ok() || dg.outputs.empty()) (void)dg.rt->synchronize();
  if (!st.ok()) return st;
  if (dg.arena->check.defined()) WH_RETURN_IF_ERROR(CheckReport(dg.arena->check));
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_start).count();
  dg.replay_ms = dg.replays == 0 ? ms : std::min(dg.replay_ms, ms);
  if (++dg.replays == kReplaysToJudge && dg.replay_ms >= kGraphMustSave * dg.eager_ms) {
    char why[160];
    std::snprintf(why, sizeof(why), "eager: a graph did not pay (best replay %.4f ms, best eager run %.4f ms)",
                  dg.replay_ms, dg.eager_ms);
    dg.eager_why = why;
    dg.Drop();
  }
  return results;
}

std::shared_ptr<DeviceGraph> DeviceGraphCache::Claim(const std::string& key, std::unique_lock<std::mutex>* lock) const {
  std::shared_ptr<DeviceGraph> dg;
  {
    std::lock_guard<std::mutex> guard(mu_);
    auto it = graphs_.find(key);
    if (it != graphs_.end()) dg = it->second;
    else if (graphs_.size() < kMaxPlans) dg = graphs_[key] = std::make_shared<DeviceGraph>();
  }
  if (dg) *lock = std::unique_lock<std::mutex>(dg->mu, std::try_to_lock);
  if (dg && !lock->owns_lock()) dg.reset();  // a replay or capture under way: this run is eager, uncounted
  return dg;
}

std::vector<std::string> DeviceGraphCache::Report() const {
  std::vector<std::pair<std::string, std::shared_ptr<DeviceGraph>>> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    all.assign(graphs_.begin(), graphs_.end());
  }
  std::vector<std::string> lines;
  for (auto& [key, dg] : all) {
    std::lock_guard<std::mutex> lock(dg->mu);
    std::string line = dg->signature + ": ";
    char buf[200];
    if (dg->graph) {
      std::snprintf(buf, sizeof(buf), "replayed as a CUDA graph (%lld replays, best %.4f ms; best eager run %.4f ms)",
                    static_cast<long long>(dg->replays), dg->replay_ms, dg->eager_ms);
      line += buf;
    } else if (!dg->eager_why.empty()) {
      line += dg->eager_why;
    } else {
      line += "eager (" + std::to_string(dg->eager_runs) + " of " + std::to_string(kEagerRunsBeforeCapture) +
              " runs before a capture)";
    }
    lines.push_back(line);
  }
  return lines;
}

}  // namespace whittle
