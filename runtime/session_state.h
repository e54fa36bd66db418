// Session's per-run state, shared by session.cc (Run) and device_graph.cc (CUDA graph replay and
// reports): the arena of buffers a run (or a graph) owns, and one input signature's CUDA graph.
// Internal to runtime/.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "lib/ir/device.h"
#include "runtime/node_runner.h"
#include "whittle/session.h"

namespace whittle {

// Recycled buffers of one Run call. A buffer goes back to the free list only when no tensor
// outside the arena still shares it (use_count == 1), so outputs handed to the caller and
// aliases (Reshape) are never reused under someone's feet.
struct Session::Arena {
  std::vector<Tensor> slots;
  std::vector<Tensor> moved;  // per value: its copy on the other device, made once per run
  // Host shape values a device kernel reads (Attention's scale): (the host value, its device copy),
  // kept across this arena's runs, so an unchanged value is not uploaded again.
  std::map<int, std::pair<Tensor, Tensor>> uploads;
  std::vector<std::shared_ptr<Buffer>> free;
  // Device outputs handed to the caller (OutputsOn::kWhereComputed): each rejoins `free` once the
  // caller has dropped it, so a loop of runs reuses its device outputs' memory too.
  std::vector<std::shared_ptr<Buffer>> lent;
  // The device check report of this arena's runs (device sessions with a ChecksOnDevice kernel;
  // kernels/kernel.h): zero between runs; a graph's arena keeps its own, which its kernels write.
  DeviceCheckReport check;
  int64_t allocated = 0, reused = 0;

  StatusOr<std::shared_ptr<Buffer>> Take(size_t bytes, DeviceType device) {
    for (size_t i = 0; i < lent.size();)
      if (lent[i].use_count() == 1) {
        free.push_back(std::move(lent[i]));
        lent.erase(lent.begin() + static_cast<long>(i));
      } else {
        ++i;
      }
    size_t best = free.size();
    for (size_t i = 0; i < free.size(); ++i)
      if (free[i]->device() == device && free[i]->size() >= bytes &&
          (best == free.size() || free[i]->size() < free[best]->size()))
        best = i;
    if (best != free.size() && free[best]->size() <= 4 * bytes + 4096) {
      std::shared_ptr<Buffer> b = std::move(free[best]);
      free.erase(free.begin() + static_cast<long>(best));
      ++reused;
      return b;
    }
    ++allocated;
    return Buffer::AllocateOn(device, bytes);
  }
  void Release(Tensor& t) {
    if (t.defined() && t.buffer().use_count() == 1) free.push_back(t.buffer());
    t = Tensor();
  }
  // t's copy on `device`, in an arena buffer: a download waits for it, an upload is queued before
  // the run's later device work (QueueTensorBytes; `queued` says the run must synchronize before
  // another thread may take this arena). held: t's bytes stay as they are until the run
  // synchronizes (a caller-fed input), so a page-locked t is read by the device directly.
  StatusOr<Tensor> CopyTo(const Tensor& t, DeviceType device, bool held = false) {
    WH_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> b, Take(t.nbytes(), device));
    Tensor c(t.dtype(), t.dims(), std::move(b));
    if (device == DeviceType::kCpu) {
      WH_RETURN_IF_ERROR(CopyTensorBytes(t, &c));
    } else {
      queued = true;
      WH_RETURN_IF_ERROR(QueueTensorBytes(t, &c, held));
    }
    return c;
  }
  bool queued = false;  // device work queued by this run that nothing has waited for yet
};

// One input signature's CUDA graph (SessionOptions::cuda_graphs): what its eager runs showed
// and, once captured, the graph with every buffer it reads or writes. All of it under mu, which a
// capture or replay holds throughout (the buffers are the graph's own, so replays take turns; a
// run that finds it busy runs eagerly).
struct Session::DeviceGraph {
  std::mutex mu;
  std::string signature;  // the input dtypes and dims, for the report
  int eager_runs = 0;    // eager runs that could have been captured
  double eager_ms = 0;   // the fastest of those whose plan was reused (0: none yet)
  std::string eager_why;  // why it runs eagerly for good (empty: not decided)
  int failed_captures = 0;
  const DeviceRuntime* rt = nullptr;
  void* graph = nullptr;
  std::unique_ptr<Arena> arena;                // every buffer the graph's kernels touch
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

// Session::RunInto: the run's outputs into the caller's tensors, once all are checked (as many,
// each of its output's dtype and dims; else an error naming the first that is not). A device
// output goes queued into a page-locked tensor (*queued = true: wait before reading it), otherwise
// it is copied now.
Status WriteOutputsInto(const Graph& g, const std::vector<const Tensor*>& produced, std::vector<Tensor>& into,
                        bool* queued);

// "float32[1,1,28,28], int64[1,12]": the fed inputs' dtypes and dims, for the report.
std::string SignatureText(const Graph& g, const std::map<std::string, Tensor>& inputs);

}  // namespace whittle
