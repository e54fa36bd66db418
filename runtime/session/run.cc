// Session::Impl::RunImpl, one call of Run or RunInto, from its parts: the inputs checked and bound
// (input_check), an arena lent (arena_pool), the plan looked up (plan_cache), the CUDA-graph policy
// (device_graph: replay, capture or eager), the steps run (executor), the outputs handed over
// (output_binding).
#include <algorithm>
#include <chrono>

#include "lib/ir/device.h"
#include "runtime/session/executor.h"
#include "runtime/session/input_check.h"
#include "runtime/session/output_binding.h"
#include "runtime/session/session_impl.h"

namespace whittle {

StatusOr<std::vector<Tensor>> Session::Impl::RunImpl(const std::map<std::string, Tensor>& inputs, RunStats* stats,
                                                     OutputsOn outputs_on, std::vector<Tensor>* into,
                                                     const BoundCaches* caches,
                                                     const std::function<void(size_t, const Tensor&)>* ready) const {
  using Clock = std::chrono::steady_clock;
  const auto t_start = Clock::now();
  const Graph& g = graph_;
  WH_RETURN_IF_ERROR(CheckInputNames(inputs, inputs_));
  std::unique_ptr<RunArena> arena = arenas_.Take();
  if (device_checks_ && !arena->check.defined()) {  // before a capture, which must not allocate it
    auto r = NewDeviceCheckReport(BackendDevice(opts_.backend), /*with_landing=*/true);
    if (!r.ok()) {
      arenas_.Give(std::move(arena));
      return r.status();
    }
    arena->check = std::move(*r);
  }
  Status st = BindInputs(g, inputs, arena->slots, arena->moved);

  // The session's device and its runtime (null on the CPU).
  const DeviceType session_device = BackendDevice(opts_.backend);
  const bool on_device = session_device != DeviceType::kCpu;
  RunContext rc(inputs, stats, *arena, session_device, on_device ? DeviceRuntimeFor(session_device) : nullptr);
  // The plan for this input signature, if one was kept; otherwise this run records one.
  const std::string key = PlanKey(g, arena->slots);
  std::shared_ptr<const ShapePlan> plan;
  bool room = false;  // a new plan would be kept
  if (st.ok()) plan = plans_.Find(key, &room);
  if (!plan && room) {
    rc.recording = std::make_unique<ShapePlan>();
    rc.recording->steps.reserve(steps_.size());
  }
  rc.plan = plan.get();
  rc.planned = plan != nullptr;
  rc.caches = caches;
  if (ready && *ready) {  // RunNotifying: which outputs each value is, and which were reported
    rc.ready = ready;
    for (size_t i = 0; i < g.outputs().size(); ++i) rc.output_at.emplace_back(g.outputs()[i], static_cast<int>(i));
    std::sort(rc.output_at.begin(), rc.output_at.end());
    rc.reported.assign(g.outputs().size(), 0);
  }

  // CUDA graphs (SessionOptions::cuda_graphs): replay this signature's graph, capture this run,
  // or run eagerly and note whether the run could have been captured.
  std::shared_ptr<DeviceGraph> dg;
  std::unique_lock<std::mutex> dg_lock;
  bool capture = false;
  if (st.ok() && opts_.cuda_graphs && rc.rt && rc.rt->begin_capture && !stats && outputs_on == OutputsOn::kHost &&
      !caches && !rc.ready) {
    dg = graphs_.Claim(key, &dg_lock);
    if (dg) {
      if (dg->signature.empty()) dg->signature = SignatureText(g, inputs);
      if (dg->graph) {
        arenas_.Recycle(std::move(arena), rc.rt);
        return ReplayGraph(*dg, inputs, t_start, into);
      }
      capture = dg->eager_why.empty() && plan && dg->eager_runs >= kEagerRunsBeforeCapture && dg->eager_ms > 0;
      if (!capture) dg_lock.unlock();  // the accounting after the run takes it again
    }
  }
  if (dg) {
    rc.watch_graph = true;
    rc.fed.assign(g.values().size(), 0);
    for (const auto& [name, t] : inputs)
      if (int id = g.FindValue(name); id >= 0) rc.fed[static_cast<size_t>(id)] = 1;
  }
  std::unique_ptr<CaptureReleases> kept;  // buffers released while capturing (freed on return unless the graph keeps them)
  if (capture) {
    st = BeginCapture(rc, *dg);
    if (!st.ok())
      return EagerAfterAll("the capture could not start (" + st.message() + ")", *dg, dg_lock, std::move(arena),
                           rc.rt, inputs, stats, outputs_on, into);
    kept = std::make_unique<CaptureReleases>();  // what the recorded work may point at lives with the graph
  }

  if (stats) stats->nodes.clear();
  if (st.ok()) st = StepExecutor(*this, rc).Run();
  for (size_t i = 0; st.ok() && rc.ready && i < rc.reported.size(); ++i)  // inputs and constants
    if (!rc.reported[i]) (*rc.ready)(i, arena->slots[static_cast<size_t>(g.outputs()[i])]);
  if (capture) {  // the graph, then its first replay, which computes this run's outputs
    st = EndCapture(rc, *dg, kept, st);
    if (!st.ok())
      return EagerAfterAll("the capture failed (" + st.message() + ")", *dg, dg_lock, std::move(arena), rc.rt,
                           inputs, stats, outputs_on, into);
  }

  std::vector<Tensor> results;
  st = FinishRun(rc, st, outputs_on, into, &results);
  if (st.ok() && caches)  // the rows the kernels appended are the caches' from now on
    for (const auto& [o, cache] : caches->outputs) {
      auto rows = rc.cache_rows.find(o);
      if (rows == rc.cache_rows.end()) st = Internal("cache output '" + g.value(o).name + "' was not computed");
      if (st.ok()) st = cache->Commit(rows->second);
    }
  if (st.ok() && rc.recording) plans_.Keep(key, std::move(rc.recording));
  const int64_t allocated = arena->allocated, reused = arena->reused;
  if (capture && dg->graph) {
    dg->arena = std::move(arena);  // the graph's buffers from now on (even if copying out failed)
  } else {
    arenas_.Give(std::move(arena));
  }
  if (dg && !capture && st.ok()) NoteEagerRun(*dg, rc, plan && rc.planned, t_start);
  if (!st.ok()) return st;
  if (stats) {
    stats->total_ms = std::chrono::duration<double, std::milli>(Clock::now() - t_start).count();
    stats->buffers_allocated = allocated;
    stats->buffers_reused = reused;
    stats->plan_reused = plan != nullptr && rc.planned;
  }
  return results;
}

Status Session::Impl::BeginCapture(RunContext& rc, DeviceGraph& dg) const {
  const Graph& g = graph_;
  for (int id : g.inputs()) {  // the inputs go into the graph's own buffers first (a replay copies them there)
    if (!rc.inputs.count(g.value(id).name)) continue;
    const Tensor& x = rc.arena.slots[static_cast<size_t>(id)];
    auto c = rc.arena.CopyTo(x, rc.device, CallerHeld(rc.inputs, x));
    if (!c.ok()) return c.status();
    rc.arena.slots[static_cast<size_t>(id)] = *c;
    dg.inputs.emplace_back(id, *c);
  }
  return rc.rt->begin_capture();
}

Status Session::Impl::EndCapture(RunContext& rc, DeviceGraph& dg, std::unique_ptr<CaptureReleases>& kept,
                                 Status st) const {
  void* graph = nullptr;
  const Status ended = rc.rt->end_capture(&graph);
  kept->Stop();
  if (st.ok()) st = ended;
  if (st.ok() && !rc.planned) st = Internal("the output shapes changed while capturing");
  if (st.ok() && !rc.not_graphable.empty()) st = Internal(rc.not_graphable);
  if (st.ok()) {
    dg.graph = graph;
    dg.rt = rc.rt;
    dg.kept = std::move(kept);
    for (int o : graph_.outputs()) dg.outputs.push_back(rc.arena.slots[static_cast<size_t>(o)]);
    st = rc.rt->replay(graph);
  } else if (graph) {
    rc.rt->drop_graph(graph);
  }
  return st;
}

StatusOr<std::vector<Tensor>> Session::Impl::EagerAfterAll(const std::string& why, DeviceGraph& dg,
                                                           std::unique_lock<std::mutex>& dg_lock,
                                                           std::unique_ptr<RunArena> arena, const DeviceRuntime* rt,
                                                           const std::map<std::string, Tensor>& inputs,
                                                           RunStats* stats, OutputsOn outputs_on,
                                                           std::vector<Tensor>* into) const {
  if (++dg.failed_captures >= kCaptureAttempts) dg.eager_why = "eager: " + why;
  dg.eager_runs = 0;  // the next attempt after as many eager runs again, this one the first
  dg.Drop();
  dg_lock.unlock();
  // A first replay that failed may have run far enough to report: the next run starts clean.
  if (arena->check.defined()) (void)CheckReport(arena->check);
  arenas_.Recycle(std::move(arena), rt);
  return RunImpl(inputs, stats, outputs_on, into);
}

Status Session::Impl::FinishRun(RunContext& rc, Status st, OutputsOn outputs_on, std::vector<Tensor>* into,
                                std::vector<Tensor>* results) const {
  const Graph& g = graph_;
  RunArena& arena = rc.arena;
  std::vector<Tensor>& slots = arena.slots;
  // The check report's words come down with the wait below (queued now, behind the run's work).
  if (arena.check.defined()) QueueCheckReportDownload(arena.check);
  if (st.ok() && into) {  // RunInto: a device output is queued down (the wait below brings it) or copied
    std::vector<const Tensor*> produced;
    for (int o : g.outputs()) produced.push_back(&slots[static_cast<size_t>(o)]);
    bool queued = false;
    st = WriteOutputsInto(g, produced, *into, &queued);
  } else if (st.ok()) {
    st = CollectOutputs(g, rc.inputs, slots, outputs_on, arena, results);
  }
  // A device output was copied out: its buffer serves the next run (a kept one is in `lent`).
  for (int o : g.outputs())
    if (slots[static_cast<size_t>(o)].device() != DeviceType::kCpu) arena.Release(slots[static_cast<size_t>(o)]);
  if (rc.on_device) {  // a device error surfaces here; after an error too, before the arena is reused
    const Status synced = rc.rt->synchronize();
    if (st.ok()) st = synced;
    arena.queued = false;
  }
  if (arena.check.defined()) {  // what the kernels reported on the device (zeroed again if any)
    const Status checked = CheckReport(arena.check);
    if (st.ok()) st = checked;
  }
  for (Tensor& t : slots) t = Tensor();  // drop references; arena keeps only free buffers
  for (Tensor& t : arena.moved) arena.Release(t);  // copies of outputs (never released by a step) too
  return st;
}

void Session::Impl::NoteEagerRun(DeviceGraph& dg, const RunContext& rc, bool plan_reused,
                                 std::chrono::steady_clock::time_point t_start) const {
  std::unique_lock<std::mutex> lock(dg.mu, std::try_to_lock);
  if (!lock.owns_lock() || !dg.eager_why.empty() || dg.graph) return;
  if (!rc.not_graphable.empty()) {
    dg.eager_why = rc.not_graphable;
    return;
  }
  ++dg.eager_runs;
  if (plan_reused) {
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_start).count();
    dg.eager_ms = dg.eager_ms > 0 ? std::min(dg.eager_ms, ms) : ms;
  }
}

Status Session::Impl::CheckReport(DeviceCheckReport& report) const {
  std::vector<int64_t> words;
  WH_ASSIGN_OR_RETURN(int64_t tag, TakeDeviceCheckReport(report, &words));
  if (tag == 0) return Status::Ok();
  if (tag < 1 || tag > static_cast<int64_t>(steps_.size()) || !steps_[static_cast<size_t>(tag - 1)]->checks)
    return Internal("a device check report names no step (" + std::to_string(tag) + ")");
  const RunStep& step = *steps_[static_cast<size_t>(tag - 1)];
  return step.kernel->DeviceCheckError(words.data()).WithContext(step.node->DebugName());
}

}  // namespace whittle
