#include "whittle/session.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <thread>

#include "kernels/nchwc.h"
#include "lib/ir/device.h"
#include "lib/onnx/model_io.h"
#include "lib/ops/op_def.h"
#include "runtime/node_runner.h"
#include "runtime/quant_validation.h"
#include "runtime/rewrite/rewrite.h"
#include "runtime/session_state.h"

namespace whittle {

struct Session::Step {
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
};

// What shape inference decided for one input signature (dtype and dims of every graph input):
// per step the output dtypes and dims, and the inputs whose *values* the inference read (Reshape's
// shape, Slice's starts, NonZero's data...) with those values. A later run with the same signature
// reuses the dims step by step as long as each step's read values are still equal; the first
// difference sends the rest of that run back to full inference. Output shapes are a function of
// input shapes and the values read, so a reused plan is exact.
struct Session::Plan {
  struct StepPlan {
    std::vector<DType> odt;
    std::vector<Dims> odims;
    std::vector<std::pair<int, Tensor>> reads;  // (input position, value at planning)
  };
  std::vector<StepPlan> steps;
};

namespace {

constexpr size_t kMaxPlans = 16;            // input signatures remembered per session
constexpr size_t kMaxPlannedReadBytes = 4096;  // larger shape-deciding values: no plan is kept

// Shape arithmetic on a device session (docs/design-notes.md, "Shape arithmetic stays on the
// host"). Shape and Size read only dims, which live on the host for a device tensor too; the ops
// below, fed only by such values and small constants, compute shapes, indices and scalars that
// Reshape, Slice or Attention read back on the host. Placed on the device, each of those tiny
// values cost a copy each way and a synchronisation per run (the exported transformer's 9
// fallback nodes). None of these ops makes an output larger than its inputs allow (no
// ConstantOfShape, Range, Expand, Tile: their sizes come from values).
constexpr int64_t kMaxHostShapeConstant = 64;  // elements of a constant a host shape step may read

bool ReadsDimsOnly(const Node& n) { return n.domain.empty() && (n.op_type == "Shape" || n.op_type == "Size"); }

bool ShapeArithmeticOp(const Node& n) {
  static const std::set<std::string> kOps = {
      "Gather", "Concat", "Cast", "Add", "Sub", "Mul", "Div", "Mod", "Pow", "Sqrt", "Neg", "Abs", "Reciprocal",
      "Floor", "Ceil", "Round", "Min", "Max", "Sign", "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual",
      "Not", "And", "Or", "Where", "Slice", "Squeeze", "Unsqueeze", "Reshape", "Flatten", "Identity",
      "ReduceProd", "ReduceSum", "ReduceMin", "ReduceMax", "Transpose"};
  return n.domain.empty() && kOps.count(n.op_type) > 0;
}

void AppendSignature(std::string* key, const Tensor* t) {
  if (!t) { *key += "-;"; return; }
  *key += std::to_string(static_cast<int>(t->dtype()));
  for (int64_t d : t->dims()) *key += "," + std::to_string(d);
  *key += ";";
}

}  // namespace

Session::~Session() = default;

StatusOr<std::unique_ptr<Session>> Session::Load(const std::string& path, const SessionOptions& opts) {
  auto g = LoadModel(path);
  if (!g.ok()) return g.status();
  return FromGraph(std::move(*g), opts);
}

StatusOr<std::unique_ptr<Session>> Session::FromGraph(Graph graph, const SessionOptions& opts) {
  if (opts.num_threads < 0) return InvalidArgument("num_threads must be >= 0, got " + std::to_string(opts.num_threads));
  RegisterAllOps();
  RegisterAllKernels();  // registers the CUDA runtime too, where it is built
  if (std::string why; !DeviceAvailable(BackendDevice(opts.backend), &why))
    return Unimplemented(std::string("device '") + BackendName(opts.backend) + "' is not available: " + why);
  if (opts.precision != Precision::kFp32 && opts.backend != Backend::kCuda)
    return InvalidArgument(std::string("precision ") + PrecisionName(opts.precision) +
                           " needs the cuda backend (the " + BackendName(opts.backend) + " backend computes in fp32)");
  if (opts.cuda_graphs && opts.backend != Backend::kCuda)
    return InvalidArgument(std::string("cuda_graphs needs the cuda backend (got ") + BackendName(opts.backend) + ")");
  std::unique_ptr<Session> s(new Session());
  s->opts_ = opts;
  if (s->opts_.num_threads == 0) s->opts_.num_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  s->graph_ = std::move(graph);
  WH_RETURN_IF_ERROR(s->graph_.Verify());
  for (const Node& n : s->graph_.nodes()) WH_RETURN_IF_ERROR(ValidateNode(n, static_cast<int>(s->graph_.OpsetFor(n.domain))));
  // Quantization parameters are checked before inference (so every op reports them the same
  // way) and again after it, when activation shapes are known for the per-axis lengths.
  WH_RETURN_IF_ERROR(ValidateQuantParams(s->graph_));
  WH_RETURN_IF_ERROR(InferShapes(s->graph_));
  WH_RETURN_IF_ERROR(ValidateQuantParams(s->graph_));
  if (opts.optimize) {
    // Lookup tables where the Lookup node runs beside the int8 kernels (no CUDA kernel yet).
    auto r = RewriteForRuntime(s->graph_, opts.blocked_layout ? NchwcBlock(opts.backend) : std::nullopt,
                               opts.backend != Backend::kCuda);
    if (!r.ok()) return r.status().WithContext("optimizing the graph");
  }
  WH_RETURN_IF_ERROR(s->Prepare());
  return s;
}

Status Session::Prepare() {
  const Graph& g = graph_;
  for (int i : g.inputs()) {
    const Value& v = g.value(i);
    if (v.is_constant()) continue;
    inputs_.push_back({v.name, v.dtype, v.shape ? *v.shape : SymShape{}});
  }
  for (int o : g.outputs()) {
    const Value& v = g.value(o);
    outputs_.push_back({v.name, v.dtype, v.shape ? *v.shape : SymShape{}});
  }
  WH_ASSIGN_OR_RETURN(std::vector<int> order, g.TopologicalOrder());
  const size_t nv = g.values().size();
  release_after_.assign(nv, -1);
  const bool on_device = BackendDevice(opts_.backend) != DeviceType::kCpu;
  std::vector<char> host_value(nv, 0);  // on a device session: computed on the host by shape steps
  for (int ni : order) {
    const Node& n = g.nodes()[static_cast<size_t>(ni)];
    auto step = std::make_unique<Step>();
    step->node = &n;
    step->def = OpRegistry::Global().Find(n.domain, n.op_type);
    step->opset = static_cast<int>(g.OpsetFor(n.domain));
    std::vector<DType> dts;
    std::vector<const Tensor*> consts;
    std::vector<int> ranks;
    for (int i : n.inputs) {
      dts.push_back(i < 0 ? DType::kUndefined : g.value(i).dtype);
      consts.push_back(i >= 0 && g.value(i).initializer ? &*g.value(i).initializer : nullptr);
      ranks.push_back(i >= 0 && g.value(i).shape ? static_cast<int>(g.value(i).shape->size()) : -1);
    }
    bool host_shape = false;
    if (on_device && ReadsDimsOnly(n)) {
      host_shape = true;
      step->dims_only = 1;
    } else if (on_device && ShapeArithmeticOp(n)) {
      bool computed = false;
      host_shape = true;
      for (int i : n.inputs) {
        if (i < 0) continue;
        const Value& v = g.value(i);
        if (host_value[static_cast<size_t>(i)]) computed = true;
        else if (!v.initializer || v.initializer->numel() > kMaxHostShapeConstant) host_shape = false;
      }
      host_shape &= computed;
    }
    if (host_shape) {
      for (int o : n.outputs)
        if (o >= 0) host_value[static_cast<size_t>(o)] = 1;
      host_nodes_.push_back(n.name.empty() ? n.op_type : n.name + " (" + n.op_type + ")");
    }
    WH_ASSIGN_OR_RETURN(step->kernel, CreateKernel(n, step->opset, host_shape ? Backend::kCpu : opts_.backend, dts,
                                                   consts, host_shape ? Precision::kFp32 : opts_.precision, ranks));
    step->alias = step->kernel->OutputAliasesInput();
    step->host_step = host_shape;
    if (!host_shape && step->alias < 0 && step->kernel->device() != BackendDevice(opts_.backend)) {
      // No kernel on the session's device for this node: the fast CPU one, with explicit copies.
      WH_ASSIGN_OR_RETURN(step->kernel, CreateKernel(n, step->opset, Backend::kCpu, dts, consts));
      fallback_nodes_.push_back(n.name.empty() ? n.op_type : n.name + " (" + n.op_type + ")");
    }
    step->device = step->kernel->device();
    if (step->device != DeviceType::kCpu) step->host_in = step->kernel->HostInputs();
    step->checks = step->alias < 0 && step->device != DeviceType::kCpu && step->kernel->ChecksOnDevice();
    device_checks_ |= step->checks;
    if (step->alias < 0 && step->device != DeviceType::kCpu)
      for (size_t k = 0; k < n.inputs.size(); ++k) {  // constants a device kernel reads: uploaded once, here
        const int i = n.inputs[k];
        if (InputBit(step->host_in, k)) continue;  // read on the host
        if (i >= 0 && g.value(i).initializer && !device_consts_.count(i)) {
          WH_ASSIGN_OR_RETURN(Tensor t, g.value(i).initializer->ToDevice(step->device));
          device_consts_.emplace(i, std::move(t));
        }
      }
    const int si = static_cast<int>(steps_.size());
    for (int i : n.inputs)
      if (i >= 0 && !g.value(i).is_constant()) release_after_[static_cast<size_t>(i)] = si;
    for (int o : n.outputs)
      if (o >= 0 && release_after_[static_cast<size_t>(o)] < 0) release_after_[static_cast<size_t>(o)] = si;
    steps_.push_back(std::move(step));
  }
  for (int o : g.outputs()) release_after_[static_cast<size_t>(o)] = -1;
  host_shape_value_ = std::move(host_value);
  release_at_step_.assign(steps_.size(), {});
  for (size_t v = 0; v < nv; ++v)
    if (release_after_[v] >= 0) release_at_step_[static_cast<size_t>(release_after_[v])].push_back(static_cast<int>(v));
  return Status::Ok();
}

StatusOr<std::vector<Tensor>> Session::Run(const std::map<std::string, Tensor>& inputs, RunStats* stats,
                                           OutputsOn outputs_on) const {
  return RunImpl(inputs, stats, outputs_on, nullptr);
}

Status Session::RunInto(const std::map<std::string, Tensor>& inputs, std::vector<Tensor>& outputs) const {
  return RunImpl(inputs, nullptr, OutputsOn::kHost, &outputs).status();
}

Status WriteOutputsInto(const Graph& g, const std::vector<const Tensor*>& produced, std::vector<Tensor>& into,
                        bool* queued) {
  if (into.size() != produced.size())
    return InvalidArgument("RunInto: the model has " + std::to_string(produced.size()) + " output(s), got " +
                           std::to_string(into.size()) + " tensor(s) to write them into");
  for (size_t i = 0; i < produced.size(); ++i) {  // every one checked before any is written
    const Tensor& t = *produced[i];
    const Tensor& d = into[i];
    if (!d.defined() || d.dtype() != t.dtype() || d.dims() != t.dims())
      return InvalidArgument("RunInto: output '" + g.value(g.outputs()[i]).name + "' is " + DTypeName(t.dtype()) +
                             DimsToString(t.dims()) + ", its tensor " +
                             (d.defined() ? std::string(DTypeName(d.dtype())) + DimsToString(d.dims()) : "is empty"));
  }
  for (size_t i = 0; i < produced.size(); ++i) {
    const Tensor& t = *produced[i];
    Tensor& dst = into[i];
    dst.quant = t.quant;
    const DeviceRuntime* rt = t.device() != DeviceType::kCpu ? DeviceRuntimeFor(t.device()) : nullptr;
    if (rt && rt->download_async && dst.buffer()->page_locked() && t.nbytes()) {
      WH_RETURN_IF_ERROR(rt->download_async(dst.raw_data(), t.raw_data(), t.nbytes()));
      *queued = true;
    } else {
      WH_RETURN_IF_ERROR(CopyTensorBytes(t, &dst));
    }
  }
  return Status::Ok();
}

StatusOr<std::vector<Tensor>> Session::RunImpl(const std::map<std::string, Tensor>& inputs, RunStats* stats,
                                               OutputsOn outputs_on, std::vector<Tensor>* into) const {
  using Clock = std::chrono::steady_clock;
  const auto t_start = Clock::now();
  const Graph& g = graph_;
  for (const auto& [name, t] : inputs) {
    bool known = false;
    for (const IoInfo& in : inputs_) known |= in.name == name;
    if (!known) return InvalidArgument("the model has no input named '" + name + "'");
  }
  std::unique_ptr<Arena> arena;
  {
    std::lock_guard<std::mutex> lock(arenas_mu_);
    if (!idle_arenas_.empty()) {
      arena = std::move(idle_arenas_.back());
      idle_arenas_.pop_back();
    }
  }
  if (!arena) arena = std::make_unique<Arena>();
  arena->allocated = arena->reused = 0;
  if (device_checks_ && !arena->check.defined()) {  // before a capture, which must not allocate it
    auto r = NewDeviceCheckReport(BackendDevice(opts_.backend), /*with_landing=*/true);
    if (!r.ok()) {
      std::lock_guard<std::mutex> lock(arenas_mu_);
      idle_arenas_.push_back(std::move(arena));
      return r.status();
    }
    arena->check = std::move(*r);
  }
  std::vector<Tensor>& slots = arena->slots;
  slots.assign(g.values().size(), Tensor());
  std::vector<Tensor>& moved = arena->moved;
  moved.assign(g.values().size(), Tensor());
  for (size_t v = 0; v < g.values().size(); ++v)
    if (g.values()[v].initializer) slots[v] = *g.values()[v].initializer;

  Status st = Status::Ok();
  for (int id : g.inputs()) {
    const Value& v = g.value(id);
    auto it = inputs.find(v.name);
    if (it == inputs.end()) {
      if (v.is_constant()) continue;
      st = InvalidArgument("missing input '" + v.name + "'");
      break;
    }
    const Tensor& t = it->second;
    if (!t.defined()) { st = InvalidArgument("input '" + v.name + "' is empty"); break; }
    if (v.dtype != DType::kUndefined && t.dtype() != v.dtype) {
      st = InvalidArgument("input '" + v.name + "' must be " + DTypeName(v.dtype) + ", got " + DTypeName(t.dtype()));
      break;
    }
    if (v.shape) {
      bool ok = v.shape->size() == t.dims().size();
      for (size_t k = 0; ok && k < t.dims().size(); ++k) ok = !(*v.shape)[k].known() || (*v.shape)[k].value == t.dims()[k];
      if (!ok) {
        st = InvalidArgument("input '" + v.name + "' must have shape " + SymShapeToString(*v.shape) + ", got " +
                             DimsToString(t.dims()));
        break;
      }
    }
    slots[static_cast<size_t>(id)] = t;
  }

  // Whether t's bytes are a caller's input (or share its buffer: a Reshape of it), which the
  // caller holds unchanged until Run returns, and Run synchronizes with the device before that:
  // a page-locked one is uploaded with no staging copy (Session::NewHostTensor).
  auto caller_held = [&](const Tensor& t) {
    if (!t.defined() || !t.buffer()->page_locked()) return false;
    for (const auto& [name, x] : inputs)
      if (x.defined() && x.buffer() == t.buffer()) return true;
    return false;
  };

  // The plan for this input signature, if one was kept; otherwise this run records one.
  std::string key;
  for (int id : g.inputs()) {
    const Tensor& t = slots[static_cast<size_t>(id)];
    AppendSignature(&key, t.defined() ? &t : nullptr);
  }
  std::shared_ptr<const Plan> plan;
  bool room = false;  // a new plan would be kept
  if (st.ok()) {
    std::lock_guard<std::mutex> lock(plans_mu_);
    auto it = plans_.find(key);
    if (it != plans_.end()) plan = it->second;
    room = plans_.size() < kMaxPlans;
  }
  std::unique_ptr<Plan> recording;
  if (!plan && room) {
    recording = std::make_unique<Plan>();
    recording->steps.reserve(steps_.size());
  }
  bool planned = plan != nullptr;  // false from the first step whose read values differ

  // The session's device and its runtime (null on the CPU).
  const DeviceType session_device = BackendDevice(opts_.backend);
  const bool on_device = session_device != DeviceType::kCpu;
  const DeviceRuntime* rt = on_device ? DeviceRuntimeFor(session_device) : nullptr;
  std::shared_ptr<DeviceGraph> dg;
  std::unique_lock<std::mutex> dg_lock;
  // This run's buffers back to the idle arenas, for a run that ends early or starts over.
  auto return_arena = [&] {
    if (arena->queued) {  // its uploads must land before another thread's run may reuse the buffers
      (void)rt->synchronize();
      arena->queued = false;
    }
    for (Tensor& t : slots) t = Tensor();
    for (Tensor& t : moved) arena->Release(t);
    std::lock_guard<std::mutex> lock(arenas_mu_);
    idle_arenas_.push_back(std::move(arena));
  };
  // A capture that failed or could not start: this run is eager after all (an error of its own is
  // reported from there), and after kCaptureAttempts so is the signature.
  auto eager_after_all = [&](const std::string& why) {
    if (++dg->failed_captures >= kCaptureAttempts) dg->eager_why = "eager: " + why;
    dg->eager_runs = 0;  // the next attempt after as many eager runs again, this one the first
    dg->Drop();
    dg_lock.unlock();
    // A first replay that failed may have run far enough to report: the next run starts clean.
    if (arena->check.defined()) (void)CheckReport(arena->check);
    return_arena();
    return RunImpl(inputs, stats, outputs_on, into);
  };
  // CUDA graphs (SessionOptions::cuda_graphs): replay this signature's graph, capture this run,
  // or run eagerly and note whether the run could have been captured.
  bool capture = false;
  if (st.ok() && opts_.cuda_graphs && rt && rt->begin_capture && !stats && outputs_on == OutputsOn::kHost) {
    {
      std::lock_guard<std::mutex> lock(graphs_mu_);
      auto it = graphs_.find(key);
      if (it != graphs_.end()) dg = it->second;
      else if (graphs_.size() < kMaxPlans) dg = graphs_[key] = std::make_shared<DeviceGraph>();
    }
    if (dg) dg_lock = std::unique_lock<std::mutex>(dg->mu, std::try_to_lock);
    if (dg && !dg_lock.owns_lock()) dg.reset();  // a replay or capture under way: this run is eager, uncounted
    if (dg) {
      if (dg->signature.empty()) dg->signature = SignatureText(g, inputs);
      if (dg->graph) {
        return_arena();
        return ReplayGraph(*dg, inputs, t_start, into);
      }
      capture = dg->eager_why.empty() && plan && dg->eager_runs >= kEagerRunsBeforeCapture && dg->eager_ms > 0;
      if (!capture) dg_lock.unlock();  // the accounting after the run takes it again
    }
  }
  // A value whose bytes are the same in every run of this signature: a constant the caller does
  // not feed, or shape arithmetic on the host (from dims alone).
  std::vector<char> fed;
  if (dg) {
    fed.assign(g.values().size(), 0);
    for (const auto& [name, t] : inputs)
      if (int id = g.FindValue(name); id >= 0) fed[static_cast<size_t>(id)] = 1;
  }
  auto fixed_value = [&](int v) {
    if (!dg) return true;
    return v >= 0 && ((g.value(v).is_constant() && !fed[static_cast<size_t>(v)]) || host_shape_value_[static_cast<size_t>(v)]);
  };
  std::string not_graphable;  // why this run could not be replayed as a graph (empty: it could)
  auto not_graph = [&](const Node& n, const char* why) {
    if (dg && not_graphable.empty()) not_graphable = "eager: " + n.DebugName() + " " + why;
  };
  bool capturing = false;
  std::unique_ptr<CaptureReleases> kept;  // buffers released while capturing (freed on return unless the graph keeps them)
  if (capture) {  // the inputs go into the graph's own buffers first (a replay copies them there)
    for (int id : g.inputs()) {
      if (!st.ok() || !inputs.count(g.value(id).name)) continue;
      const Tensor& x = slots[static_cast<size_t>(id)];
      auto c = arena->CopyTo(x, session_device, caller_held(x));
      if (!c.ok()) { st = c.status(); break; }
      slots[static_cast<size_t>(id)] = *c;
      dg->inputs.emplace_back(id, *c);
    }
    if (st.ok()) st = rt->begin_capture();
    if (!st.ok()) return eager_after_all("the capture could not start (" + st.message() + ")");
    capturing = true;
    kept = std::make_unique<CaptureReleases>();  // what the recorded work may point at lives with the graph
  }

  const int prev_threads = omp_get_max_threads();
  omp_set_num_threads(opts_.num_threads);
  if (stats) stats->nodes.clear();
  std::vector<const Tensor*> in, infer_in;
  std::vector<Tensor*> out;
  std::vector<DType> inferred_dt;
  std::vector<Dims> inferred_dims;
  for (size_t si = 0; st.ok() && si < steps_.size(); ++si) {
    const Step& step = *steps_[si];
    const Node& n = *step.node;
    const auto t0 = stats ? Clock::now() : Clock::time_point();
    if (step.alias < 0 && step.device == DeviceType::kCpu && !step.host_step) not_graph(n, "runs on the CPU");
    in.clear();
    for (int i : n.inputs) in.push_back(i >= 0 ? &slots[static_cast<size_t>(i)] : nullptr);
    // Shape inference (and the plan's value checks) read values on the host only: a device input
    // shows its dtype and dims (InferConcrete), and its value after a download only where
    // inference or the plan asks for it (a shape computed on the device). Downloading every
    // non-float device input cost an int8 model a device-to-host copy per node.
    const std::vector<const Tensor*>* infer = &in;  // a CPU session's are all host tensors
    if (on_device) {
      infer_in = in;
      infer = &infer_in;
    }
    auto download = [&](size_t k) -> Status {
      if (!on_device || !in[k] || in[k]->device() == DeviceType::kCpu) return Status::Ok();
      not_graph(n, "reads a value computed on the device on the host");
      const size_t v = static_cast<size_t>(n.inputs[k]);
      if (!moved[v].defined() || moved[v].device() != DeviceType::kCpu) {
        auto h = arena->CopyTo(*in[k], DeviceType::kCpu);
        if (!h.ok()) return h.status().WithContext(n.DebugName());
        moved[v] = std::move(*h);
      }
      infer_in[k] = &moved[v];
      return Status::Ok();
    };
    const std::vector<DType>* odt_p = &inferred_dt;
    const std::vector<Dims>* odims_p = &inferred_dims;
    if (planned) {
      const Plan::StepPlan& sp = plan->steps[si];
      for (const auto& [pos, value] : sp.reads) {
        if (!fixed_value(n.inputs[static_cast<size_t>(pos)])) not_graph(n, "has output shapes that depend on input values");
        st = download(static_cast<size_t>(pos));
        if (!st.ok()) break;
        const Tensor* now = (*infer)[static_cast<size_t>(pos)];
        planned &= now && now->BitwiseEquals(value);
      }
      if (!st.ok()) break;
      if (planned) {
        odt_p = &sp.odt;
        odims_p = &sp.odims;
      }
    }
    if (!planned) {
      uint64_t reads = 0, asks = 0;
      st = InferConcrete(*step.def, n, step.opset, *infer, &inferred_dt, &inferred_dims, &reads, &asks);
      bool retry = false;
      Status dl = Status::Ok();
      for (size_t k = 0; on_device && dl.ok() && k < in.size(); ++k)
        if (InputBit(asks, k) && in[k] && infer_in[k]->device() != DeviceType::kCpu) {
          dl = download(k);
          retry = true;
        }
      if (!dl.ok()) st = dl;
      else if (retry) st = InferConcrete(*step.def, n, step.opset, *infer, &inferred_dt, &inferred_dims, &reads);
      if (!st.ok()) break;
      for (size_t k = 0; dg && k < in.size(); ++k)
        if (InputBit(reads, k) && in[k] && !fixed_value(n.inputs[k])) not_graph(n, "has output shapes that depend on input values");
      if (recording) {
        Plan::StepPlan sp{inferred_dt, inferred_dims, {}};
        for (size_t k = 0; k < in.size() && reads; ++k) {
          const Tensor* t = (*infer)[k];
          if (!InputBit(reads, k) || !t) continue;
          if (t->nbytes() > kMaxPlannedReadBytes) { recording.reset(); break; }
          sp.reads.emplace_back(static_cast<int>(k), t->Clone());
        }
        if (recording) recording->steps.push_back(std::move(sp));
      }
    }
    const std::vector<DType>& odt = *odt_p;
    const std::vector<Dims>& odims = *odims_p;
    if (step.alias < 0)
      for (size_t k = 0; st.ok() && k < in.size(); ++k) {
        // Where input k must be: the step's device, or the host for what the kernel reads there
        // (InputDevice's rule, from the mask cached at load).
        const DeviceType want = InputBit(step.host_in, k) ? DeviceType::kCpu : step.device;
        if (in[k] && InputBit(step.host_in, k) && !fixed_value(n.inputs[k])) not_graph(n, "reads an input value on the host");
        if (!in[k] || in[k]->device() == want || InputBit(step.dims_only, k)) continue;
        const size_t v = static_cast<size_t>(n.inputs[k]);
        if (auto c = device_consts_.find(static_cast<int>(v)); c != device_consts_.end() && c->second.device() == want) {
          in[k] = &c->second;
          continue;
        }
        if (want == DeviceType::kCpu) {  // a device value a device kernel reads on the host
          st = download(k);
          if (st.ok()) in[k] = infer_in[k];
          continue;
        }
        if (!moved[v].defined() || moved[v].device() != step.device) {
          // A host shape value: its device copy from an earlier run while the value is unchanged
          // (an upload mid-run waits for the device's queue; the exported transformer's
          // Attention scale cost one such wait per run).
          const bool reuse = host_shape_value_[v] && in[k]->device() == DeviceType::kCpu &&
                             in[k]->nbytes() <= kMaxPlannedReadBytes;
          auto u = reuse ? arena->uploads.find(static_cast<int>(v)) : arena->uploads.end();
          if (u != arena->uploads.end() && u->second.second.device() == step.device &&
              u->second.first.BitwiseEquals(*in[k])) {
            moved[v] = u->second.second;
          } else {
            auto c = arena->CopyTo(*in[k], step.device, caller_held(*in[k]));
            if (!c.ok()) { st = c.status().WithContext(n.DebugName()); break; }
            moved[v] = std::move(*c);
            if (reuse) arena->uploads[static_cast<int>(v)] = {in[k]->Clone(), moved[v]};
          }
        }
        in[k] = &moved[v];
      }
    if (!st.ok()) break;
    out.clear();
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      int o = n.outputs[k];
      if (o < 0) { out.push_back(nullptr); continue; }
      Tensor& t = slots[static_cast<size_t>(o)];
      if (k == 0 && step.alias >= 0) {
        t = in[static_cast<size_t>(step.alias)]->Reshaped(odims[k]);
      } else {
        const size_t bytes = static_cast<size_t>(NumElements(odims[k])) * DTypeSize(odt[k]);
        auto b = arena->Take(bytes, step.device);
        if (!b.ok()) { st = b.status().WithContext(n.DebugName()); break; }
        t = Tensor(odt[k], odims[k], std::move(*b));
      }
      out.push_back(&t);
    }
    if (!st.ok()) break;
    if (step.alias < 0) {
      KernelContext ctx{in, out, opts_.num_threads};
      if (step.checks) {
        ctx.device_check = arena->check.device_words();
        ctx.check_tag = static_cast<int64_t>(si) + 1;
      }
      st = step.kernel->Compute(ctx);
      // Profiling times a device step to its end (otherwise only its launch would show).
      if (st.ok() && stats && step.device != DeviceType::kCpu) st = DeviceRuntimeFor(step.device)->synchronize();
      if (!st.ok()) {
        st = st.WithContext(n.DebugName());
        break;
      }
    }
    const DeviceType ran_on = step.alias >= 0 ? in[static_cast<size_t>(step.alias)]->device() : step.device;
    for (int v : release_at_step_[si]) {
      arena->Release(slots[static_cast<size_t>(v)]);
      arena->Release(moved[static_cast<size_t>(v)]);
    }
    if (stats) {
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      // Fused work shows in the op type: "QConv+Relu+MaxPool".
      std::string op = n.op_type;
      if (n.attrs.Has("_activation")) op += "+" + n.attrs.GetString("_activation", "");
      if (n.attrs.Has("_max_pool")) op += "+MaxPool";
      stats->nodes.push_back({n.name, op, ms, DeviceName(ran_on)});
    }
  }
  omp_set_num_threads(prev_threads);
  for (int o : g.outputs())
    if (st.ok() && dg && slots[static_cast<size_t>(o)].device() == DeviceType::kCpu)
      not_graphable = "eager: output '" + g.value(o).name + "' is computed on the host";

  if (capturing) {  // the graph, then its first replay, which computes this run's outputs
    void* graph = nullptr;
    const Status ended = rt->end_capture(&graph);
    kept->Stop();
    if (st.ok()) st = ended;
    if (st.ok() && !planned) st = Internal("the output shapes changed while capturing");
    if (st.ok() && !not_graphable.empty()) st = Internal(not_graphable);
    if (st.ok()) {
      dg->graph = graph;
      dg->rt = rt;
      dg->kept = std::move(kept);
      for (int o : g.outputs()) dg->outputs.push_back(slots[static_cast<size_t>(o)]);
      st = rt->replay(graph);
    } else if (graph) {
      rt->drop_graph(graph);
    }
    if (!st.ok()) return eager_after_all("the capture failed (" + st.message() + ")");
  }

  // The check report's words come down with the wait below (queued now, behind the run's work).
  if (arena->check.defined()) QueueCheckReportDownload(arena->check);
  std::vector<Tensor> results;
  if (st.ok() && into) {  // RunInto: a device output is queued down (the wait below brings it) or copied
    std::vector<const Tensor*> produced;
    for (int o : g.outputs()) produced.push_back(&slots[static_cast<size_t>(o)]);
    bool queued = false;
    st = WriteOutputsInto(g, produced, *into, &queued);
  } else if (st.ok()) {
    for (int o : g.outputs()) {
      Tensor& t = slots[static_cast<size_t>(o)];
      // Never hand out a constant's or an input's buffer: the caller may write into results.
      bool shared = g.value(o).is_constant();
      for (const auto& [name, x] : inputs) shared |= t.defined() && x.defined() && x.buffer() == t.buffer();
      if (t.device() != DeviceType::kCpu && outputs_on == OutputsOn::kWhereComputed && !shared) {
        if (std::find(arena->lent.begin(), arena->lent.end(), t.buffer()) == arena->lent.end())
          arena->lent.push_back(t.buffer());
        results.push_back(t);
        continue;
      }
      if (t.device() != DeviceType::kCpu) {  // the copy back waits for the device's queued work
        auto h = t.ToDevice(DeviceType::kCpu);
        if (!h.ok()) { st = h.status(); break; }
        results.push_back(std::move(*h));
        continue;
      }
      results.push_back(shared ? t.Clone() : t);
    }
  }
  // A device output was copied out: its buffer serves the next run (a kept one is in `lent`).
  for (int o : g.outputs())
    if (slots[static_cast<size_t>(o)].device() != DeviceType::kCpu) arena->Release(slots[static_cast<size_t>(o)]);
  if (on_device) {  // a device error surfaces here; after an error too, before the arena is reused
    const Status synced = rt->synchronize();
    if (st.ok()) st = synced;
    arena->queued = false;
  }
  if (arena->check.defined()) {  // what the kernels reported on the device (zeroed again if any)
    const Status checked = CheckReport(arena->check);
    if (st.ok()) st = checked;
  }
  for (Tensor& t : slots) t = Tensor();  // drop references; arena keeps only free buffers
  for (Tensor& t : moved) arena->Release(t);  // copies of outputs (never released by a step) too
  if (st.ok() && recording) {
    std::lock_guard<std::mutex> lock(plans_mu_);
    if (plans_.size() < kMaxPlans) plans_.emplace(key, std::move(recording));
  }
  const int64_t allocated = arena->allocated, reused = arena->reused;
  if (capturing && dg->graph) {
    dg->arena = std::move(arena);  // the graph's buffers from now on (even if copying out failed)
  } else {
    std::lock_guard<std::mutex> lock(arenas_mu_);
    idle_arenas_.push_back(std::move(arena));
  }
  if (dg && !capture && st.ok()) {  // what this eager run showed
    std::unique_lock<std::mutex> lock(dg->mu, std::try_to_lock);
    if (lock.owns_lock() && dg->eager_why.empty() && !dg->graph) {
      if (!not_graphable.empty()) {
        dg->eager_why = not_graphable;
      } else {
        ++dg->eager_runs;
        if (plan && planned) {
          const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t_start).count();
          dg->eager_ms = dg->eager_ms > 0 ? std::min(dg->eager_ms, ms) : ms;
        }
      }
    }
  }
  if (!st.ok()) return st;
  if (stats) {
    stats->total_ms = std::chrono::duration<double, std::milli>(Clock::now() - t_start).count();
    stats->buffers_allocated = allocated;
    stats->buffers_reused = reused;
    stats->plan_reused = plan != nullptr && planned;
  }
  return results;
}

StatusOr<Tensor> Session::NewHostTensor(DType dtype, const Dims& dims) const {
  if (DTypeSize(dtype) == 0) return InvalidArgument(std::string("NewHostTensor: no tensor of dtype ") + DTypeName(dtype));
  WH_ASSIGN_OR_RETURN(int64_t n, CheckedNumElements(dims));
  if (n > (int64_t{1} << 56)) return InvalidArgument("NewHostTensor: shape " + DimsToString(dims) + " is too large");
  const DeviceType device = BackendDevice(opts_.backend);
  WH_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> b,
                      Buffer::AllocatePageLocked(device, static_cast<size_t>(n) * DTypeSize(dtype)));
  return Tensor(dtype, dims, std::move(b));
}

Status Session::CheckReport(DeviceCheckReport& report) const {
  std::vector<int64_t> words;
  WH_ASSIGN_OR_RETURN(int64_t tag, TakeDeviceCheckReport(report, &words));
  if (tag == 0) return Status::Ok();
  if (tag < 1 || tag > static_cast<int64_t>(steps_.size()) || !steps_[static_cast<size_t>(tag - 1)]->checks)
    return Internal("a device check report names no step (" + std::to_string(tag) + ")");
  const Step& step = *steps_[static_cast<size_t>(tag - 1)];
  return step.kernel->DeviceCheckError(words.data()).WithContext(step.node->DebugName());
}

}  // namespace whittle
