#include "runtime/session/executor.h"

#include <omp.h>

#include <algorithm>
#include <chrono>

#include "runtime/session/input_check.h"

namespace whittle {

StepExecutor::StepExecutor(const Session::Impl& s, RunContext& rc)
    : s_(s), rc_(rc), g_(s.graph_), slots_(rc.arena.slots), moved_(rc.arena.moved) {}

Status StepExecutor::Run() {
  const int prev_threads = omp_get_max_threads();
  omp_set_num_threads(s_.opts_.num_threads);
  const RunDeadline deadline(s_.opts_.max_run_ms);
  deadline_ = &deadline;
  Status st = Status::Ok();
  {
    ScopedRunDeadline scope(deadline.active() ? &deadline : nullptr);
    for (size_t si = 0; st.ok() && si < s_.steps_.size(); ++si) st = Step(si);
  }
  deadline_ = nullptr;
  omp_set_num_threads(prev_threads);
  for (int o : g_.outputs())
    if (st.ok() && rc_.watch_graph && slots_[static_cast<size_t>(o)].device() == DeviceType::kCpu)
      rc_.not_graphable = "eager: output '" + g_.value(o).name + "' is computed on the host";
  return st;
}

Status StepExecutor::Step(size_t si) {
  using Clock = std::chrono::steady_clock;
  const RunStep& step = *s_.steps_[si];
  const Node& n = *step.node;
  if (deadline_->Expired()) return DeadlineExceeded(deadline_->Message()).WithContext(n.DebugName());
  const auto t0 = rc_.stats ? Clock::now() : Clock::time_point();
  if (step.alias < 0 && step.device == DeviceType::kCpu && !step.host_step) NotGraph(n, "runs on the CPU");
  step_ = &step;
  in_.clear();
  for (int i : n.inputs) in_.push_back(i >= 0 ? &slots_[static_cast<size_t>(i)] : nullptr);
  // Shape inference (and the plan's value checks) read values on the host only: a device input
  // shows its dtype and dims (InferConcrete), and its value after a download only where
  // inference or the plan asks for it (a shape computed on the device). Downloading every
  // non-float device input cost an int8 model a device-to-host copy per node.
  infer_ = &in_;  // a CPU session's are all host tensors
  if (rc_.on_device) {
    infer_in_ = in_;
    infer_ = &infer_in_;
  }
  const std::vector<DType>* odt = nullptr;
  const std::vector<Dims>* odims = nullptr;
  if (step.sets_outputs) {
    // Control flow: its outputs' shapes are known once its subgraphs ran; the kernel sets them.
    NotGraph(n, "is control flow (If/Loop/Scan)");
    if (rc_.recording) rc_.recording->steps.emplace_back();
    rc_.planned = false;
    WH_RETURN_IF_ERROR(PlaceInputs(step));
    out_.clear();
    for (int o : n.outputs) {
      if (o >= 0) slots_[static_cast<size_t>(o)] = Tensor();
      out_.push_back(o >= 0 ? &slots_[static_cast<size_t>(o)] : nullptr);
    }
    WH_RETURN_IF_ERROR(Compute(si, step));
    for (size_t k = 0; k < n.outputs.size(); ++k)
      if (n.outputs[k] >= 0 && !slots_[static_cast<size_t>(n.outputs[k])].defined())
        return Internal(n.DebugName() + ": output " + std::to_string(k) + " was not set");
  } else {
    WH_RETURN_IF_ERROR(Shapes(si, &odt, &odims));
    if (step.alias < 0) WH_RETURN_IF_ERROR(PlaceInputs(step));
    WH_RETURN_IF_ERROR(MakeOutputs(step, *odt, *odims));
    if (step.alias < 0) WH_RETURN_IF_ERROR(Compute(si, step));
  }
  const DeviceType ran_on = step.alias >= 0 ? in_[static_cast<size_t>(step.alias)]->device() : step.device;
  for (int v : s_.release_at_step_[si]) {
    rc_.arena.Release(slots_[static_cast<size_t>(v)]);
    rc_.arena.Release(moved_[static_cast<size_t>(v)]);
  }
  if (rc_.ready)
    for (int o : n.outputs) {
      auto it = std::lower_bound(rc_.output_at.begin(), rc_.output_at.end(), std::make_pair(o, -1));
      for (; o >= 0 && it != rc_.output_at.end() && it->first == o; ++it) {
        rc_.reported[static_cast<size_t>(it->second)] = 1;
        (*rc_.ready)(static_cast<size_t>(it->second), slots_[static_cast<size_t>(o)]);
      }
    }
  if (rc_.stats) {
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    // Fused work shows in the op type: "QConv+Relu+MaxPool".
    std::string op = n.op_type;
    if (n.attrs.Has("_activation")) op += "+" + n.attrs.GetString("_activation", "");
    if (n.attrs.Has("_max_pool")) op += "+MaxPool";
    rc_.stats->nodes.push_back({n.name, op, ms, DeviceName(ran_on)});
  }
  return Status::Ok();
}

Status StepExecutor::Shapes(size_t si, const std::vector<DType>** odt, const std::vector<Dims>** odims) {
  const Node& n = *step_->node;
  *odt = &inferred_dt_;
  *odims = &inferred_dims_;
  if (rc_.planned) {
    const ShapePlan::StepPlan& sp = rc_.plan->steps[si];
    for (const auto& [pos, value] : sp.reads) {
      if (!FixedValue(n.inputs[static_cast<size_t>(pos)])) NotGraph(n, "has output shapes that depend on input values");
      WH_RETURN_IF_ERROR(Download(n, static_cast<size_t>(pos)));
      const Tensor* now = (*infer_)[static_cast<size_t>(pos)];
      rc_.planned &= now && now->BitwiseEquals(value);
    }
    if (rc_.planned) {
      *odt = &sp.odt;
      *odims = &sp.odims;
      return Status::Ok();
    }
  }
  return Infer(*step_);
}

Status StepExecutor::Infer(const RunStep& step) {
  const Node& n = *step.node;
  uint64_t reads = 0, asks = 0;
  Status st = InferConcrete(*step.def, n, step.opset, *infer_, &inferred_dt_, &inferred_dims_, &reads, &asks);
  bool retry = false;
  Status dl = Status::Ok();
  for (size_t k = 0; rc_.on_device && dl.ok() && k < in_.size(); ++k)
    if (InputBit(asks, k) && in_[k] && infer_in_[k]->device() != DeviceType::kCpu) {
      dl = Download(n, k);
      retry = true;
    }
  if (!dl.ok()) st = dl;
  else if (retry) st = InferConcrete(*step.def, n, step.opset, *infer_, &inferred_dt_, &inferred_dims_, &reads);
  if (!st.ok()) return st;
  for (size_t k = 0; rc_.watch_graph && k < in_.size(); ++k)
    if (InputBit(reads, k) && in_[k] && !FixedValue(n.inputs[k])) NotGraph(n, "has output shapes that depend on input values");
  if (rc_.recording) {
    ShapePlan::StepPlan sp{inferred_dt_, inferred_dims_, {}};
    for (size_t k = 0; k < in_.size() && reads; ++k) {
      const Tensor* t = (*infer_)[k];
      if (!InputBit(reads, k) || !t) continue;
      if (t->nbytes() > kMaxPlannedReadBytes) { rc_.recording.reset(); break; }
      sp.reads.emplace_back(static_cast<int>(k), t->Clone());
    }
    if (rc_.recording) rc_.recording->steps.push_back(std::move(sp));
  }
  return Status::Ok();
}

Status StepExecutor::PlaceInputs(const RunStep& step) {
  const Node& n = *step.node;
  for (size_t k = 0; k < in_.size(); ++k) {
    // Where input k must be: the step's device, or the host for what the kernel reads there
    // (InputDevice's rule, from the mask cached at load).
    const DeviceType want = InputBit(step.host_in, k) ? DeviceType::kCpu : step.device;
    if (in_[k] && InputBit(step.host_in, k) && !FixedValue(n.inputs[k])) NotGraph(n, "reads an input value on the host");
    if (!in_[k] || in_[k]->device() == want || InputBit(step.dims_only, k)) continue;
    const size_t v = static_cast<size_t>(n.inputs[k]);
    if (auto c = s_.device_consts_.find(static_cast<int>(v)); c != s_.device_consts_.end() && c->second.device() == want) {
      in_[k] = &c->second;
      continue;
    }
    if (want == DeviceType::kCpu) {  // a device value a device kernel reads on the host
      WH_RETURN_IF_ERROR(Download(n, k));
      in_[k] = infer_in_[k];
      continue;
    }
    if (!moved_[v].defined() || moved_[v].device() != step.device) {
      // A host shape value: its device copy from an earlier run while the value is unchanged
      // (an upload mid-run waits for the device's queue; the exported transformer's
      // Attention scale cost one such wait per run).
      const bool reuse = s_.host_shape_value_[v] && in_[k]->device() == DeviceType::kCpu &&
                         in_[k]->nbytes() <= kMaxPlannedReadBytes;
      auto u = reuse ? rc_.arena.uploads.find(static_cast<int>(v)) : rc_.arena.uploads.end();
      if (u != rc_.arena.uploads.end() && u->second.second.device() == step.device &&
          u->second.first.BitwiseEquals(*in_[k])) {
        moved_[v] = u->second.second;
      } else {
        auto c = rc_.arena.CopyTo(*in_[k], step.device, CallerHeld(rc_.inputs, *in_[k]));
        if (!c.ok()) return c.status().WithContext(n.DebugName());
        moved_[v] = std::move(*c);
        if (reuse) rc_.arena.uploads[static_cast<int>(v)] = {in_[k]->Clone(), moved_[v]};
      }
    }
    in_[k] = &moved_[v];
  }
  return Status::Ok();
}

Status StepExecutor::MakeOutputs(const RunStep& step, const std::vector<DType>& odt, const std::vector<Dims>& odims) {
  const Node& n = *step.node;
  out_.clear();
  for (size_t k = 0; k < n.outputs.size(); ++k) {
    int o = n.outputs[k];
    if (o < 0) { out_.push_back(nullptr); continue; }
    if (rc_.caches && rc_.caches->outputs.count(o)) {  // grown in place: the kernel writes the cache
      if (odims[k].size() != 4) return Internal("cache output '" + g_.value(o).name + "' is not 4-D");
      rc_.cache_rows[o] = odims[k][2];
      out_.push_back(nullptr);
      continue;
    }
    Tensor& t = slots_[static_cast<size_t>(o)];
    if (k == 0 && step.alias >= 0) {
      t = in_[static_cast<size_t>(step.alias)]->Reshaped(odims[k]);
    } else {
      // Checked: a hostile shape's element count or byte size may not fit 63 bits.
      const auto bytes = CheckedNumBytes(odims[k], odt[k]);
      auto b = bytes.ok() ? rc_.arena.Take(static_cast<size_t>(*bytes), step.device)
                          : StatusOr<std::shared_ptr<Buffer>>(bytes.status());
      if (!b.ok())
        return b.status().WithContext("output '" + g_.value(o).name + "' of shape " + DimsToString(odims[k]))
            .WithContext(n.DebugName());
      t = Tensor(odt[k], odims[k], std::move(*b));
    }
    out_.push_back(&t);
  }
  return Status::Ok();
}

Status StepExecutor::Compute(size_t si, const RunStep& step) {
  KernelContext ctx{in_, out_, s_.opts_.num_threads};
  if (rc_.caches && step.kernel->InPlaceCacheInputs())
    for (size_t k = 0; k < in_.size(); ++k) {
      auto c = rc_.caches->inputs.find(step.node->inputs[k]);
      if (c == rc_.caches->inputs.end()) continue;
      ctx.caches.resize(in_.size(), nullptr);
      ctx.caches[k] = c->second;
    }
  if (step.checks) {
    ctx.device_check = rc_.arena.check.device_words();
    ctx.check_tag = static_cast<int64_t>(si) + 1;
  }
  Status st = step.kernel->Compute(ctx);
  // A kernel whose parallel loops saw the deadline pass skipped work: its outputs are not used.
  if (st.ok() && deadline_->Expired()) st = DeadlineExceeded(deadline_->Message());
  // Profiling times a device step to its end (otherwise only its launch would show).
  if (st.ok() && rc_.stats && step.device != DeviceType::kCpu) st = DeviceRuntimeFor(step.device)->synchronize();
  if (!st.ok()) return st.WithContext(step.node->DebugName());
  return st;
}

Status StepExecutor::Download(const Node& n, size_t k) {
  if (!rc_.on_device || !in_[k] || in_[k]->device() == DeviceType::kCpu) return Status::Ok();
  NotGraph(n, "reads a value computed on the device on the host");
  const size_t v = static_cast<size_t>(n.inputs[k]);
  if (!moved_[v].defined() || moved_[v].device() != DeviceType::kCpu) {
    auto h = rc_.arena.CopyTo(*in_[k], DeviceType::kCpu);
    if (!h.ok()) return h.status().WithContext(n.DebugName());
    moved_[v] = std::move(*h);
  }
  infer_in_[k] = &moved_[v];
  return Status::Ok();
}

bool StepExecutor::FixedValue(int v) const {
  if (!rc_.watch_graph) return true;
  return v >= 0 && ((g_.value(v).is_constant() && !rc_.fed[static_cast<size_t>(v)]) ||
                    s_.host_shape_value_[static_cast<size_t>(v)]);
}

void StepExecutor::NotGraph(const Node& n, const char* why) {
  if (rc_.watch_graph && rc_.not_graphable.empty()) rc_.not_graphable = "eager: " + n.DebugName() + " " + why;
}

}  // namespace whittle
