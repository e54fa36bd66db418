// Session::Impl: what Load builds (the rewritten graph, one planned step per node with its kernel,
// value lifetimes, constants uploaded to the device) and the caches runs share (idle arenas, shape
// plans, CUDA graphs). Its parts: prepare.cc builds the steps, run.cc runs a call (input_check,
// arena_pool, plan_cache, device_graph, executor, output_binding each do one job of it).
// Internal to runtime/.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/kernel.h"
#include "lib/ir/graph.h"
#include "lib/ops/op_def.h"
#include "runtime/node_runner.h"
#include "runtime/session/arena_pool.h"
#include "runtime/session/device_graph.h"
#include "runtime/session/plan_cache.h"
#include "whittle/session.h"

namespace whittle {

// One planned node.
struct RunStep {
  const Node* node = nullptr;
  const OpDef* def = nullptr;
  int opset = 0;
  std::unique_ptr<OpKernel> kernel;
  int alias = -1;
  DeviceType device = DeviceType::kCpu;  // where the kernel computes (an alias follows its input)
  // Inputs whose dims alone the kernel reads (Shape, Size): never copied to the step's device.
  uint64_t dims_only = 0;
  // A device kernel's inputs it reads on the host (OpKernel::HostInputs: Slice's starts, ...).
  uint64_t host_in = 0;
  bool host_step = false;  // shape arithmetic on the host by design (a device session's)
  bool checks = false;     // reports into the run's device check report (OpKernel::ChecksOnDevice)
  bool sets_outputs = false;  // OpKernel::SetsOutputs (control flow): no inference, no allocation
};

struct RunContext;  // runtime/session/executor.h

// Shape and Size: nodes that read their input's dims, never its bytes.
inline bool ReadsDimsOnly(const Node& n) { return n.domain.empty() && (n.op_type == "Shape" || n.op_type == "Size"); }

// Session::RunWithCaches's caches by value id: the bound inputs and their paired outputs.
struct BoundCaches {
  std::map<int, KvCache*> inputs, outputs;
};

struct Session::Impl {
  // Builds the steps of graph_ (prepare.cc).
  Status Prepare();
  // Run and RunInto (into: the caller's output tensors, then the result is empty); run.cc.
  StatusOr<std::vector<Tensor>> RunImpl(const std::map<std::string, Tensor>& inputs, RunStats* stats,
                                        OutputsOn outputs_on, std::vector<Tensor>* into,
                                        const BoundCaches* caches = nullptr,
                                        const std::function<void(size_t, const Tensor&)>* ready = nullptr) const;
  // Session::RunWithCaches (cache_binding.cc).
  StatusOr<std::vector<Tensor>> RunWithCachesImpl(const std::map<std::string, Tensor>& inputs,
                                                  const std::vector<CacheBinding>& caches, RunStats* stats) const;
  // The value ids of CheckCacheBindings's pairs (cache_binding.cc), or why a pair cannot grow in place.
  Status ResolveCaches(const std::vector<std::pair<std::string, std::string>>& pairs,
                       std::vector<std::pair<int, int>>* ids) const;
  // Reads a run's device check report once its device work is done (kernels/kernel.h): the error
  // of the kernel that reported, naming its node; the report is zero again after.
  Status CheckReport(DeviceCheckReport& report) const;
  // A captured signature's run: its inputs into the graph's, one launch, its outputs out
  // (device_graph.cc); under dg.mu.
  StatusOr<std::vector<Tensor>> ReplayGraph(DeviceGraph& dg, const std::map<std::string, Tensor>& inputs,
                                            std::chrono::steady_clock::time_point t_start,
                                            std::vector<Tensor>* into) const;

  // RunImpl's parts (run.cc). A capture: the fed inputs into the graph's own buffers, then the
  // recording starts; the end of one: the graph kept (and replayed once) or why not.
  // kept: what the capture's work may point at, the graph's once it is kept.
  Status BeginCapture(RunContext& rc, DeviceGraph& dg) const;
  Status EndCapture(RunContext& rc, DeviceGraph& dg, std::unique_ptr<CaptureReleases>& kept, Status st) const;
  // A capture that failed or could not start: this run is eager after all (an error of its own is
  // reported from there), and after kCaptureAttempts so is the signature.
  StatusOr<std::vector<Tensor>> EagerAfterAll(const std::string& why, DeviceGraph& dg,
                                              std::unique_lock<std::mutex>& dg_lock, std::unique_ptr<RunArena> arena,
                                              const DeviceRuntime* rt, const std::map<std::string, Tensor>& inputs,
                                              RunStats* stats, OutputsOn outputs_on, std::vector<Tensor>* into) const;
  // The outputs handed over (results, or into), the device waited for, what its kernels reported
  // read, the arena emptied; st: the run's status so far (the first error is the one returned).
  Status FinishRun(RunContext& rc, Status st, OutputsOn outputs_on, std::vector<Tensor>* into,
                   std::vector<Tensor>* results) const;
  // What an eager run of a signature considered for a CUDA graph showed (when no replay or capture
  // holds the graph): why it cannot be one, or one more run that could, and its time.
  void NoteEagerRun(DeviceGraph& dg, const RunContext& rc, bool plan_reused,
                    std::chrono::steady_clock::time_point t_start) const;

  SessionOptions opts_;
  Graph graph_;
  std::vector<IoInfo> inputs_, outputs_;
  std::vector<std::unique_ptr<RunStep>> steps_;
  std::vector<int> release_after_;      // per value: step index after which it can be recycled (-1 never)
  std::vector<std::vector<int>> release_at_step_;  // per step: values that die after it
  std::vector<std::string> fallback_nodes_;
  std::vector<std::string> host_nodes_;
  std::vector<char> host_shape_value_;  // per value: made on the host by a shape step (device sessions)
  std::map<int, Tensor> device_consts_;  // initializers device kernels read, uploaded at load
  bool device_checks_ = false;  // a step reports on the device (OpKernel::ChecksOnDevice)
  ArenaPool arenas_;
  PlanCache plans_;
  // Last, so graphs go before the buffers and kernels they use.
  DeviceGraphCache graphs_;
};

}  // namespace whittle
