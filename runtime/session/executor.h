// The per-step loop of Session::Run: for each planned step, its output shapes (from the kept plan
// while the values it read are unchanged, else shape inference, recording a new plan), its inputs
// moved to where its kernel reads them, its outputs taken from the run's arena, the kernel run,
// the values that die after it recycled, and its time in RunStats. Internal to runtime/session/.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lib/ir/run_deadline.h"
#include "runtime/session/session_impl.h"

namespace whittle {

// One Run call's state, shared by RunImpl (run.cc) and the step loop.
struct RunContext {
  RunContext(const std::map<std::string, Tensor>& inputs_, RunStats* stats_, RunArena& arena_, DeviceType device_,
             const DeviceRuntime* rt_)
      : inputs(inputs_), stats(stats_), arena(arena_), device(device_), on_device(device_ != DeviceType::kCpu), rt(rt_) {}

  const std::map<std::string, Tensor>& inputs;
  RunStats* stats;
  RunArena& arena;
  DeviceType device;          // the session's
  bool on_device;             // device != kCpu
  const DeviceRuntime* rt;    // the device's runtime (null on the CPU)
  const ShapePlan* plan = nullptr;          // the plan kept for this input signature (null: none)
  bool planned = false;                     // false from the first step whose read values differ
  std::unique_ptr<ShapePlan> recording;     // the plan this run records (null: none)
  // A CUDA graph is considered for this signature: the run notes in not_graphable why it could
  // not be replayed as one (empty: it could). fed: per value, whether the caller feeds it.
  bool watch_graph = false;
  std::vector<char> fed;
  std::string not_graphable;
  // RunWithCaches: the caches grown in place, and per bound output the rows its cache holds once
  // the run succeeds (its inferred dims[2]).
  const BoundCaches* caches = nullptr;
  std::map<int, int64_t> cache_rows;
  // RunNotifying: called with (output index, value) once a step computed it; output_at holds
  // (value id, output index) sorted, reported which outputs were.
  const std::function<void(size_t, const Tensor&)>* ready = nullptr;
  std::vector<std::pair<int, int>> output_at;
  std::vector<char> reported;
};

class StepExecutor {
 public:
  StepExecutor(const Session::Impl& s, RunContext& rc);
  // Every step in order on the session's OpenMP threads, until the first error (rc.stats gets
  // one NodeTime per step run) or until the session's time budget passes (max_run_ms: checked
  // before and after each step, and by ParallelFor inside the CPU kernels).
  Status Run();

 private:
  Status Step(size_t si);
  // The step's output dtypes and dims: the plan's, or inferred (and recorded).
  Status Shapes(size_t si, const std::vector<DType>** odt, const std::vector<Dims>** odims);
  Status Infer(const RunStep& step);
  // Each input where the step's kernel reads it: the step's device, or the host.
  Status PlaceInputs(const RunStep& step);
  Status MakeOutputs(const RunStep& step, const std::vector<DType>& odt, const std::vector<Dims>& odims);
  Status Compute(size_t si, const RunStep& step);
  // Input k's value on the host for inference or a host read (a copy made once per run).
  Status Download(const Node& n, size_t k);
  // A value whose bytes are the same in every run of this signature: a constant the caller does
  // not feed, or shape arithmetic on the host (from dims alone).
  bool FixedValue(int v) const;
  void NotGraph(const Node& n, const char* why);

  const Session::Impl& s_;
  RunContext& rc_;
  const Graph& g_;
  std::vector<Tensor>& slots_;
  std::vector<Tensor>& moved_;
  const RunStep* step_ = nullptr;  // the step running
  const RunDeadline* deadline_ = nullptr;  // the run's time budget (inactive: none)
  std::vector<const Tensor*> in_, infer_in_;
  const std::vector<const Tensor*>* infer_ = nullptr;
  std::vector<Tensor*> out_;
  std::vector<DType> inferred_dt_;
  std::vector<Dims> inferred_dims_;
};

}  // namespace whittle
