// Session: the public entry point of Whittle's runtime. Load() validates a model, infers shapes,
// runs the runtime's own rewrites (constant folding, Conv+BatchNormalization folding,
// bias/activation fusion), builds and prepacks one kernel per node, and plans buffer reuse from
// value lifetimes. Run() is const and thread-safe: each call takes its own arena, so many
// threads may share one Session and get results identical to a single-threaded run.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "whittle/kv_cache.h"
#include "whittle/status.h"
#include "whittle/tensor.h"
#include "whittle/types.h"

namespace whittle {

class Graph;  // lib/ir/graph.h: the model IR, internal (Session::FromGraph serves code built with Whittle)

struct SessionOptions {
  Backend backend = Backend::kCpu;  // kReference runs the plain reference kernels; kCuda needs a CUDA build
  int num_threads = 1;                 // intra-op threads; 0 = all hardware threads
  bool optimize = true;                // runtime rewrites (folding, fusion)
  // CPU, with optimize: convolutions, and the pools, Relus and Adds between them, run on the
  // channel-blocked layout oneDNN's convolutions prefer (runtime/rewrite/nchwc.h), reordered only
  // where the region starts and ends. false keeps every tensor NCHW (WHITTLE_NCHWC=0 does too).
  bool blocked_layout = true;
  // kCuda: float32 Gemm/MatMul/Conv on tensor cores with the operands rounded to TF32, FP16 or
  // BF16 inside cuBLAS (float32 accumulation and tensors; see Precision). Other backends accept
  // kFp32 only.
  Precision precision = Precision::kFp32;
  // CPU: Gemm/MatMul keep a packed copy of each constant weight (faster for batches up to 256
  // rows). false reads the weights where they are: for a session run once or twice over a model
  // that is also held elsewhere in memory (compress-model's shape probe of a compressed decoder),
  // where the copy would only add the weights' size again to the peak.
  bool pack_weights = true;
  // kCuda: replay a run as one CUDA graph where that pays (docs/design-notes.md, "CUDA graphs").
  // Per input signature, once three runs have shown the whole run stays on the device with
  // shapes fixed by the signature (no CPU fallback, no device value read on the host, every
  // output on the device), the fourth is captured; later runs copy the inputs in, launch the
  // graph and copy the outputs out. A graph whose first replays are no faster than the eager
  // runs is dropped, with its buffers. Runs with a RunStats, or OutputsOn::kWhereComputed, stay
  // eager. device_graph_report() says what each signature got.
  bool cuda_graphs = false;
  // A budget for what the session allocates (constants, activations, copies), in bytes; 0: the
  // process's default, which is none unless a tool set one (the CLIs' --max-memory, whose default
  // is 80 % of the machine's memory, applies to every session the tool makes). A run whose tensors
  // would pass it fails with a ResourceExhausted error naming the tensor and its size, before the
  // allocation. Without a budget an allocation the system refuses is such an error too.
  int64_t max_memory_bytes = 0;
  // A time budget for each Run, in milliseconds; 0: the process's default, which is none unless a
  // tool set one (the CLIs' --max-run-time). Checked before and after every node, and between
  // chunks of the CPU kernels' parallel loops (so a long kernel stops within a fraction of its
  // work; a oneDNN, Eigen or device call runs to its end first). A run past it fails with a
  // DeadlineExceeded error naming the node it stopped at; the session stays usable.
  int64_t max_run_ms = 0;
};

struct IoInfo {
  std::string name;
  DType dtype;     // a sequence's or optional's element type
  SymShape shape;  // empty for a sequence or an optional
  ValueKind kind = ValueKind::kTensor;
};

// Per-node timings of one Run (filled when a RunStats* is passed).
struct RunStats {
  struct NodeTime {
    std::string name, op_type;
    double ms = 0;
    std::string device = "cpu";  // where it ran ("cuda", or "cpu" for a node that fell back)
  };
  std::vector<NodeTime> nodes;
  double total_ms = 0;
  int64_t buffers_allocated = 0;  // fresh allocations this run (the rest came from reuse)
  int64_t buffers_reused = 0;
  // The output shapes came from the plan cached for these input shapes (no per-node shape
  // inference); false on the first run of a signature and when a shape-deciding value changed.
  bool plan_reused = false;
};

// Where Session::Run leaves its outputs: copied to host memory (the default), or, for a caller
// that keeps working on the device (the trainer's optimizer), on the device whose kernel computed
// each one (no copy back; a CPU-computed output stays on the host).
enum class OutputsOn { kHost, kWhereComputed };

class Session {
 public:
  static StatusOr<std::unique_ptr<Session>> Load(const std::string& path, const SessionOptions& opts = {});
  // From a graph built or rewritten in memory (passes); validates it like a loaded model.
  static StatusOr<std::unique_ptr<Session>> FromGraph(Graph graph, const SessionOptions& opts = {});
  ~Session();

  // Inputs by name; returns outputs in the order of outputs(). Thread-safe.
  // Inputs may be on any device (each is copied where a kernel needs it, once per run).
  StatusOr<std::vector<Tensor>> Run(const std::map<std::string, Tensor>& inputs, RunStats* stats = nullptr,
                                    OutputsOn outputs_on = OutputsOn::kHost) const;

  // Run, calling ready(i, value) on the calling thread as soon as output i is computed, before the
  // steps after it run: a trainer starts the all-reduce of each gradient while the backward pass
  // goes on. value is the run's own buffer, valid only during the call (copy what you keep); on a
  // device backend it is in the device's stream order. Outputs no step computes (an input or a
  // constant) are reported once the steps ran. Each output is reported once; the result is Run's.
  StatusOr<std::vector<Tensor>> RunNotifying(const std::map<std::string, Tensor>& inputs,
                                             const std::function<void(size_t, const Tensor&)>& ready,
                                             OutputsOn outputs_on = OutputsOn::kHost) const;

  // Run, with output i's values written into outputs[i], which must already have output i's dtype
  // and dims (made once and kept for run after run; a mismatch is an error naming the output, and
  // nothing is written then). On a device backend, memory from NewHostTensor is written by the
  // device directly, every output queued behind the run's one wait: no allocation and no staging
  // copy per run (ONNX Runtime's bound outputs). Thread-safe as Run; nobody else may touch
  // outputs[i] until it returns.
  Status RunInto(const std::map<std::string, Tensor>& inputs, std::vector<Tensor>& outputs) const;

  // A past key/value cache input (past_key_values.0.key), the output that returns it grown
  // (present.0.key), and the KvCache that holds it for RunWithCaches.
  struct CacheBinding {
    std::string input, output;
    KvCache* cache = nullptr;
  };
  // Whether each (cache input, output) pair can grow in place: the input is read only by kernels
  // that append to a cache (ai.onnx Attention's past_key/past_value) and by shape reads (Shape),
  // its paired output is that kernel's present output, and nothing reads the output. Otherwise
  // why not, naming the node that needs the cache as a dense tensor (an exporter's Concat of past
  // and new rows).
  Status CheckCacheBindings(const std::vector<std::pair<std::string, std::string>>& pairs) const;
  // Run, with each bound cache input read from its KvCache and this call's rows appended to it in
  // place instead of being copied into a new output: the caller does not feed the bound inputs,
  // the bound outputs come back undefined (the cache holds them; KvCache::Dense copies them out),
  // and each cache's length grows by the run's new rows once the run succeeded (unchanged after
  // an error). The caches must not be shared with a concurrent run; otherwise thread-safe as Run.
  StatusOr<std::vector<Tensor>> RunWithCaches(const std::map<std::string, Tensor>& inputs,
                                              const std::vector<CacheBinding>& caches,
                                              RunStats* stats = nullptr) const;

  // A zero-filled host tensor for an input a caller fills and feeds run after run: on a device
  // backend it is page-locked memory (Buffer::AllocatePageLocked), which Run uploads with no
  // staging copy and without waiting for it (the caller keeps it unchanged until Run returns, as
  // for any input); on the CPU plain memory. Allocating such memory is slow: make it once, refill it.
  // It serves RunInto's outputs the same way.
  StatusOr<Tensor> NewHostTensor(DType dtype, const Dims& dims) const;

  const std::vector<IoInfo>& inputs() const;
  const std::vector<IoInfo>& outputs() const;
  const SessionOptions& options() const;
  // On a device backend: the nodes with no kernel there, run on the CPU with explicit copies
  // ("name (OpType)"); empty on the CPU.
  const std::vector<std::string>& fallback_nodes() const;
  // On a device backend: the shape arithmetic computed on the host by design (Shape, Size, and
  // the Gather/Concat/Cast/... fed only by them and small constants: the dims Reshape reads, the
  // scale Attention reads); not fallbacks. Empty on the CPU.
  const std::vector<std::string>& host_shape_nodes() const;
  // With cuda_graphs: one line per input signature seen, "float32[1,1,28,28]: replayed as a
  // CUDA graph (N replays, best x ms; eager best y ms)" or why it runs eagerly. Empty otherwise.
  std::vector<std::string> device_graph_report() const;

  // The loaded model, its kernels and its caches (runtime/session/session_impl.h); opaque here.
  struct Impl;

 private:
  explicit Session(std::unique_ptr<Impl> impl);
  static StatusOr<std::unique_ptr<Session>> FromGraphImpl(Graph graph, const SessionOptions& opts);
  // The graph as executed, after the runtime's rewrites (runtime/session_internal.h).
  friend const Graph& SessionGraph(const Session& s);

  std::unique_ptr<Impl> impl_;
};

}  // namespace whittle
