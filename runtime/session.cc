// Session, the public entry point (include/whittle/session.h): Load and FromGraph validate the
// model, infer shapes, apply the runtime's rewrites and build the steps (Session::Impl, in
// runtime/session/); Run and RunInto hand each call to Impl::RunImpl (runtime/session/run.cc).
#include "whittle/session.h"

#include <algorithm>
#include <exception>
#include <new>
#include <thread>

#include "kernels/nchwc.h"
#include "lib/ir/memory_meter.h"
#include "lib/ir/run_deadline.h"
#include "lib/onnx/model_io.h"
#include "lib/ops/op_def.h"
#include "runtime/quant_validation.h"
#include "runtime/rewrite/rewrite.h"
#include "runtime/session/session_impl.h"
#include "runtime/session_internal.h"

namespace whittle {

Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Session::~Session() = default;

namespace {

// Runs f, turning an exception from a failed allocation or an oversized shape (lib/ir/tensor.h:
// Buffer::Allocate, NumElements) into an error Status: no input a model, a flag or a data file can
// give ends the process from inside the library.
template <class F>
auto Guarded(const char* what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::bad_alloc& e) {
    return ResourceExhausted(std::string(what) + ": " + e.what());
  } catch (const std::exception& e) {
    return Internal(std::string(what) + ": " + e.what());
  }
}

// The weights against the memory budget (they are already in memory: the budget then still
// holds them to it, since every run needs them).
Status CheckWeights(const Graph& g, int64_t budget) {
  if (budget <= 0) return Status::Ok();
  uint64_t bytes = 0;
  for (const Value& v : g.values())
    if (v.initializer) bytes += v.initializer->nbytes();
  if (bytes > static_cast<uint64_t>(budget))
    return ResourceExhausted("the model's weights need " + HumanBytes(bytes) + ", over the memory budget of " +
                             HumanBytes(static_cast<uint64_t>(budget)) + " (--max-memory, SessionOptions::max_memory_bytes)");
  return Status::Ok();
}

}  // namespace

StatusOr<std::unique_ptr<Session>> Session::Load(const std::string& path, const SessionOptions& opts) {
  return Guarded("loading the model", [&]() -> StatusOr<std::unique_ptr<Session>> {
    auto g = LoadModel(path);
    if (!g.ok()) return g.status();
    return FromGraph(std::move(*g), opts);
  });
}

StatusOr<std::unique_ptr<Session>> Session::FromGraph(Graph graph, const SessionOptions& opts) {
  return Guarded("preparing the session", [&]() { return FromGraphImpl(std::move(graph), opts); });
}

StatusOr<std::unique_ptr<Session>> Session::FromGraphImpl(Graph graph, const SessionOptions& opts) {
  if (opts.num_threads < 0) return InvalidArgument("num_threads must be >= 0, got " + std::to_string(opts.num_threads));
  if (opts.max_memory_bytes < 0)
    return InvalidArgument("max_memory_bytes must be >= 0, got " + std::to_string(opts.max_memory_bytes));
  if (opts.max_run_ms < 0) return InvalidArgument("max_run_ms must be >= 0, got " + std::to_string(opts.max_run_ms));
  const int64_t budget = opts.max_memory_bytes > 0 ? opts.max_memory_bytes : ProcessMemoryBudget();
  WH_RETURN_IF_ERROR(CheckWeights(graph, budget));
  RegisterAllOps();
  RegisterAllKernels();  // registers the CUDA runtime too, where it is built
  if (std::string why; !DeviceAvailable(BackendDevice(opts.backend), &why))
    return Unimplemented(std::string("device '") + BackendName(opts.backend) + "' is not available: " + why);
  if (opts.precision != Precision::kFp32 && opts.backend != Backend::kCuda)
    return InvalidArgument(std::string("precision ") + PrecisionName(opts.precision) +
                           " needs the cuda backend (the " + BackendName(opts.backend) + " backend computes in fp32)");
  if (opts.cuda_graphs && opts.backend != Backend::kCuda)
    return InvalidArgument(std::string("cuda_graphs needs the cuda backend (got ") + BackendName(opts.backend) + ")");
  auto impl = std::make_unique<Impl>();
  Impl& s = *impl;
  s.opts_ = opts;
  s.opts_.max_memory_bytes = budget;  // options() reports the budgets in force
  if (s.opts_.max_run_ms == 0) s.opts_.max_run_ms = ProcessRunTimeBudget();
  if (s.opts_.num_threads == 0) s.opts_.num_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  s.graph_ = std::move(graph);
  WH_RETURN_IF_ERROR(s.graph_.Verify());
  for (const Node& n : s.graph_.nodes()) WH_RETURN_IF_ERROR(ValidateNode(n, static_cast<int>(s.graph_.OpsetFor(n.domain))));
  // Quantization parameters are checked before inference (so every op reports them the same
  // way) and again after it, when activation shapes are known for the per-axis lengths.
  WH_RETURN_IF_ERROR(ValidateQuantParams(s.graph_));
  WH_RETURN_IF_ERROR(InferShapes(s.graph_));
  WH_RETURN_IF_ERROR(ValidateQuantParams(s.graph_));
  if (opts.optimize) {
    // The CPU-only fusions (lookup tables, cached attention: no CUDA kernels yet) on the CPU only.
    auto r = RewriteForRuntime(s.graph_, opts.blocked_layout ? NchwcBlock(opts.backend) : std::nullopt,
                               opts.backend != Backend::kCuda);
    if (!r.ok()) return r.status().WithContext("optimizing the graph");
  }
  if (budget > 0) s.arenas_.meter = std::make_shared<MemoryMeter>(budget);
  WH_RETURN_IF_ERROR(s.Prepare());
  return std::unique_ptr<Session>(new Session(std::move(impl)));
}

StatusOr<std::vector<Tensor>> Session::Run(const std::map<std::string, Tensor>& inputs, RunStats* stats,
                                           OutputsOn outputs_on) const {
  return Guarded("running the model", [&] { return impl_->RunImpl(inputs, stats, outputs_on, nullptr); });
}

Status Session::RunInto(const std::map<std::string, Tensor>& inputs, std::vector<Tensor>& outputs) const {
  return Guarded("running the model", [&] { return impl_->RunImpl(inputs, nullptr, OutputsOn::kHost, &outputs).status(); });
}

Status Session::CheckCacheBindings(const std::vector<std::pair<std::string, std::string>>& pairs) const {
  std::vector<std::pair<int, int>> ids;
  return impl_->ResolveCaches(pairs, &ids);
}

StatusOr<std::vector<Tensor>> Session::RunNotifying(const std::map<std::string, Tensor>& inputs,
                                                    const std::function<void(size_t, const Tensor&)>& ready,
                                                    OutputsOn outputs_on) const {
  return Guarded("running the model", [&] { return impl_->RunImpl(inputs, nullptr, outputs_on, nullptr, nullptr, &ready); });
}

StatusOr<std::vector<Tensor>> Session::RunWithCaches(const std::map<std::string, Tensor>& inputs,
                                                     const std::vector<CacheBinding>& caches, RunStats* stats) const {
  return Guarded("running the model", [&] { return impl_->RunWithCachesImpl(inputs, caches, stats); });
}

StatusOr<Tensor> Session::NewHostTensor(DType dtype, const Dims& dims) const {
  if (DTypeSize(dtype) == 0) return InvalidArgument(std::string("NewHostTensor: no tensor of dtype ") + DTypeName(dtype));
  WH_ASSIGN_OR_RETURN(int64_t n, CheckedNumElements(dims));
  if (n > (int64_t{1} << 56)) return InvalidArgument("NewHostTensor: shape " + DimsToString(dims) + " is too large");
  const DeviceType device = BackendDevice(impl_->opts_.backend);
  WH_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> b,
                      Buffer::AllocatePageLocked(device, static_cast<size_t>(n) * DTypeSize(dtype)));
  return Tensor(dtype, dims, std::move(b));
}

const std::vector<IoInfo>& Session::inputs() const { return impl_->inputs_; }
const std::vector<IoInfo>& Session::outputs() const { return impl_->outputs_; }
const SessionOptions& Session::options() const { return impl_->opts_; }
const std::vector<std::string>& Session::fallback_nodes() const { return impl_->fallback_nodes_; }
const std::vector<std::string>& Session::host_shape_nodes() const { return impl_->host_nodes_; }
std::vector<std::string> Session::device_graph_report() const { return impl_->graphs_.Report(); }

const Graph& SessionGraph(const Session& s) { return s.impl_->graph_; }

}  // namespace whittle
