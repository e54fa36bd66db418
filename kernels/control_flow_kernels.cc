// If, Loop and Scan kernels: the iteration and the slicing and stacking of values, around
// subgraph runs (kernels/subgraph_runner.h). One kernel for every backend: the subgraphs run on the
// session's backend, the control logic reads cond, M and the trip count on the host.
#include <algorithm>
#include <cstring>
#include <limits>
#include <mutex>

#include "kernels/subgraph_runner.h"
#include "lib/ir/graph.h"
#include "lib/ir/memory_meter.h"
#include "lib/ir/run_deadline.h"

namespace whittle {
namespace {

std::mutex& FactoryMu() {
  static std::mutex mu;
  return mu;
}
SubgraphRunnerFactory& Factory() {
  static SubgraphRunnerFactory f;
  return f;
}

StatusOr<std::unique_ptr<SubgraphRunner>> MakeRunner(const KernelInit& init, const char* attr) {
  const Graph* g = init.attrs.GetGraph(attr);
  if (!g) return InvalidArgument(std::string("graph attribute '") + attr + "' is missing");
  SubgraphRunnerFactory f;
  {
    std::lock_guard<std::mutex> lock(FactoryMu());
    f = Factory();
  }
  if (!f) return Unimplemented("control flow needs the runtime (no subgraph runner is installed)");
  auto r = f(*g, init);
  if (!r.ok()) return r.status().WithContext(std::string("subgraph '") + attr + "'");
  return r;
}

Status HostOnly(const Tensor* t, const char* what) {
  if (t && t->device() != DeviceType::kCpu) return Internal(std::string(what) + " is not on the host");
  return Status::Ok();
}

StatusOr<bool> ReadBool(const Tensor* t, const char* what) {
  WH_RETURN_IF_ERROR(HostOnly(t, what));
  if (t->dtype() != DType::kBool || t->numel() != 1)
    return InvalidArgument(std::string(what) + " must be one bool, got " + DTypeName(t->dtype()) + " of shape " +
                           DimsToString(t->dims()));
  return t->data<bool>()[0];
}

Tensor BoolScalar(bool v) {
  Tensor t(DType::kBool, {});
  t.data<bool>()[0] = v;
  return t;
}

Tensor Int64Scalar(int64_t v) {
  Tensor t(DType::kInt64, {});
  t.data<int64_t>()[0] = v;
  return t;
}

// outs[0, count) handed to the node's first `count` output slots.
void SetOutputs(KernelContext& ctx, std::vector<Tensor>& outs, size_t count) {
  for (size_t k = 0; k < count; ++k)
    if (ctx.outputs[k]) *ctx.outputs[k] = std::move(outs[k]);
}

// Copies slice `index` along `axis` of t (its dims without that axis).
Tensor SliceAlong(const Tensor& t, int64_t axis, int64_t index) {
  Dims d = t.dims();
  int64_t outer = 1, inner = 1;
  for (int64_t k = 0; k < axis; ++k) outer *= d[static_cast<size_t>(k)];
  for (size_t k = static_cast<size_t>(axis) + 1; k < d.size(); ++k) inner *= d[k];
  const int64_t len = d[static_cast<size_t>(axis)];
  const size_t es = DTypeSize(t.dtype());
  d.erase(d.begin() + axis);
  Tensor s(t.dtype(), d);
  const auto* src = static_cast<const char*>(t.raw_data());
  auto* dst = static_cast<char*>(s.raw_data());
  const size_t row = static_cast<size_t>(inner) * es;
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(dst + static_cast<size_t>(o) * row, src + static_cast<size_t>(o * len + index) * row, row);
  return s;
}

// Stacks equal-shaped parts along a new axis `axis` (parts[i] becomes index i).
StatusOr<Tensor> StackAlong(const std::vector<Tensor>& parts, int64_t axis, const char* what, size_t k) {
  const Tensor& p0 = parts[0];
  for (const Tensor& p : parts)
    if (p.dims() != p0.dims() || p.dtype() != p0.dtype())
      return InvalidArgument(std::string(what) + " " + std::to_string(k) + " changes from " + DimsToString(p0.dims()) +
                             " to " + DimsToString(p.dims()) + " between iterations; they are stacked, so must agree");
  const int64_t r = p0.rank() + 1;
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r)
    return InvalidArgument(std::string(what) + " axis " + std::to_string(axis) + " is out of range for rank " +
                           std::to_string(r));
  Dims d = p0.dims();
  const auto len = static_cast<int64_t>(parts.size());
  int64_t outer = 1, inner = 1;
  for (int64_t a = 0; a < axis; ++a) outer *= d[static_cast<size_t>(a)];
  for (size_t a = static_cast<size_t>(axis); a < d.size(); ++a) inner *= d[a];
  d.insert(d.begin() + axis, len);
  Tensor out(p0.dtype(), d);
  const size_t row = static_cast<size_t>(inner) * DTypeSize(p0.dtype());
  auto* dst = static_cast<char*>(out.raw_data());
  for (int64_t i = 0; i < len; ++i) {
    const auto* src = static_cast<const char*>(parts[static_cast<size_t>(i)].raw_data());
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(dst + static_cast<size_t>(o * len + i) * row, src + static_cast<size_t>(o) * row, row);
  }
  return out;
}

class ControlFlowKernel : public OpKernel {
 public:
  bool SetsOutputs() const override { return true; }
};

// Between iterations: the run's time budget (a loop whose cond never turns false runs until it
// passes) and the process's memory budget for the scan outputs gathered so far.
Status IterationChecks(int64_t i, uint64_t gathered_bytes) {
  if (RunDeadlinePassed())
    return DeadlineExceeded(CurrentRunDeadline()->Message() + " (after " + std::to_string(i) + " iterations)");
  if (const int64_t budget = ProcessMemoryBudget(); budget > 0 && gathered_bytes > static_cast<uint64_t>(budget))
    return ResourceExhausted("the scan outputs of " + std::to_string(i) + " iterations need " +
                             HumanBytes(gathered_bytes) + ", over the memory budget of " +
                             HumanBytes(static_cast<uint64_t>(budget)));
  return Status::Ok();
}

// ---------------------------------------------------------------- If

class IfKernel : public ControlFlowKernel {
 public:
  IfKernel(std::unique_ptr<SubgraphRunner> t, std::unique_ptr<SubgraphRunner> e) : then_(std::move(t)), else_(std::move(e)) {}
  Status Compute(KernelContext& ctx) const override {
    WH_ASSIGN_OR_RETURN(bool c, ReadBool(ctx.inputs[0], "cond"));
    const std::vector<const Tensor*> outer(ctx.inputs.begin() + 1, ctx.inputs.end());
    auto outs = (c ? then_ : else_)->Run(outer);
    if (!outs.ok()) return outs.status().WithContext(c ? "then_branch" : "else_branch");
    if (outs->size() != ctx.outputs.size()) return Internal("If branch output count differs from the node's");
    SetOutputs(ctx, *outs, outs->size());
    return Status::Ok();
  }

 private:
  std::unique_ptr<SubgraphRunner> then_, else_;
};

KernelOr MakeIf(const KernelInit& init) {
  WH_ASSIGN_OR_RETURN(auto t, MakeRunner(init, "then_branch"));
  WH_ASSIGN_OR_RETURN(auto e, MakeRunner(init, "else_branch"));
  return std::unique_ptr<OpKernel>(new IfKernel(std::move(t), std::move(e)));
}

// ---------------------------------------------------------------- Loop

class LoopKernel : public ControlFlowKernel {
 public:
  LoopKernel(std::unique_ptr<SubgraphRunner> body, size_t carried, size_t explicit_inputs)
      : body_(std::move(body)), carried_(carried), explicit_(explicit_inputs) {}

  Status Compute(KernelContext& ctx) const override {
    int64_t trips = std::numeric_limits<int64_t>::max();
    if (const Tensor* m = ctx.inputs[0]) {
      WH_RETURN_IF_ERROR(HostOnly(m, "M"));
      if (m->dtype() != DType::kInt64 || m->numel() != 1)
        return InvalidArgument("M must be one int64, got " + std::string(DTypeName(m->dtype())) + " of shape " +
                               DimsToString(m->dims()));
      trips = m->data<int64_t>()[0];
    }
    bool cond = true;
    if (ctx.inputs[1]) {
      WH_ASSIGN_OR_RETURN(cond, ReadBool(ctx.inputs[1], "cond"));
    }
    std::vector<Tensor> state(carried_);
    for (size_t k = 0; k < carried_; ++k) {
      if (!ctx.inputs[2 + k]) return InvalidArgument("loop-carried input " + std::to_string(k) + " is missing");
      state[k] = *ctx.inputs[2 + k];
    }
    const size_t scans = ctx.outputs.size() - carried_;
    std::vector<std::vector<Tensor>> parts(scans);
    std::vector<const Tensor*> in(ctx.inputs.size());
    for (size_t j = explicit_; j < ctx.inputs.size(); ++j) in[j] = ctx.inputs[j];
    uint64_t gathered = 0;
    for (int64_t i = 0; i < trips && cond; ++i) {
      WH_RETURN_IF_ERROR(IterationChecks(i, gathered));
      const Tensor iter = Int64Scalar(i), c = BoolScalar(cond);
      in[0] = &iter;
      in[1] = &c;
      for (size_t k = 0; k < carried_; ++k) in[2 + k] = &state[k];
      auto outs = body_->Run(in);
      if (!outs.ok()) return outs.status().WithContext("body, iteration " + std::to_string(i));
      if (outs->size() != 1 + carried_ + scans) return Internal("Loop body output count differs from the node's");
      WH_ASSIGN_OR_RETURN(cond, ReadBool(&(*outs)[0], "the body's cond output"));
      for (size_t k = 0; k < carried_; ++k) state[k] = std::move((*outs)[1 + k]);
      for (size_t k = 0; k < scans; ++k) {
        gathered += (*outs)[1 + carried_ + k].nbytes();
        parts[k].push_back(std::move((*outs)[1 + carried_ + k]));
      }
    }
    SetOutputs(ctx, state, carried_);
    for (size_t k = 0; k < scans; ++k) {
      Tensor* out = ctx.outputs[carried_ + k];
      if (!out) continue;
      if (parts[k].empty()) {  // no iteration: an empty stack of what the body declares
        Dims d = body_->OutputDimsOrEmpty(1 + carried_ + k);
        d.insert(d.begin(), 0);
        *out = Tensor(body_->OutputDType(1 + carried_ + k), d);
        continue;
      }
      WH_ASSIGN_OR_RETURN(*out, StackAlong(parts[k], 0, "scan output", k));
    }
    return Status::Ok();
  }

 private:
  std::unique_ptr<SubgraphRunner> body_;
  size_t carried_, explicit_;
};

// The explicit input count: the node's inputs less the outer values its subgraphs read (the
// subgraph knows how many those are).
size_t ExplicitInputs(const KernelInit& init, const char* attr) {
  const Graph* g = init.attrs.GetGraph(attr);
  return init.input_dtypes.size() - static_cast<size_t>(g ? g->outer_inputs : 0);
}

KernelOr MakeLoop(const KernelInit& init) {
  const size_t explicit_in = ExplicitInputs(init, "body");
  if (explicit_in < 2) return InvalidArgument("Loop needs inputs M and cond");
  WH_ASSIGN_OR_RETURN(auto body, MakeRunner(init, "body"));
  return std::unique_ptr<OpKernel>(new LoopKernel(std::move(body), explicit_in - 2, explicit_in));
}

// ---------------------------------------------------------------- Scan

class ScanKernel : public ControlFlowKernel {
 public:
  ScanKernel(std::unique_ptr<SubgraphRunner> body, bool batched, size_t states, size_t scans,
             std::vector<int64_t> in_dirs, std::vector<int64_t> out_dirs, std::vector<int64_t> in_axes,
             std::vector<int64_t> out_axes)
      : body_(std::move(body)), batched_(batched), states_(states), scans_(scans), in_dirs_(std::move(in_dirs)),
        out_dirs_(std::move(out_dirs)), in_axes_(std::move(in_axes)), out_axes_(std::move(out_axes)) {}

  Status Compute(KernelContext& ctx) const override {
    const size_t lead = batched_ ? 1 : 0;
    const size_t explicit_in = lead + states_ + scans_;
    std::vector<const Tensor*> outer(ctx.inputs.begin() + static_cast<std::ptrdiff_t>(explicit_in), ctx.inputs.end());
    std::vector<const Tensor*> st(states_), sc(scans_);
    for (size_t k = 0; k < states_; ++k) {
      st[k] = ctx.inputs[lead + k];
      if (!st[k]) return InvalidArgument("state input " + std::to_string(k) + " is missing");
      WH_RETURN_IF_ERROR(HostOnly(st[k], "state input"));
    }
    for (size_t j = 0; j < scans_; ++j) {
      sc[j] = ctx.inputs[lead + states_ + j];
      if (!sc[j]) return InvalidArgument("scan input " + std::to_string(j) + " is missing");
      WH_RETURN_IF_ERROR(HostOnly(sc[j], "scan input"));
    }
    const size_t outs_n = ctx.outputs.size() - states_;
    std::vector<Tensor> final_states;
    std::vector<Tensor> scan_outs;
    if (!batched_) {
      WH_RETURN_IF_ERROR(Run(st, sc, outer, -1, &final_states, &scan_outs));
    } else {
      // Scan 8: one scan per batch element (axis 0 of every input), stacked again.
      int64_t batch = -1;
      for (const Tensor* t : st) batch = t->rank() > 0 ? t->dims()[0] : -1;
      for (const Tensor* t : sc) batch = t->rank() > 1 ? t->dims()[0] : -1;
      for (const Tensor* t : st)
        if (t->rank() == 0 || t->dims()[0] != batch) return InvalidArgument("inputs disagree on the batch size");
      for (const Tensor* t : sc)
        if (t->rank() < 2 || t->dims()[0] != batch) return InvalidArgument("inputs disagree on the batch size");
      const Tensor* lens = ctx.inputs[0];
      if (lens) {
        WH_RETURN_IF_ERROR(HostOnly(lens, "sequence_lens"));
        if (lens->dtype() != DType::kInt64 || lens->numel() != batch)
          return InvalidArgument("sequence_lens must be int64 of shape [" + std::to_string(batch) + "]");
      }
      std::vector<std::vector<Tensor>> per_state(states_), per_out(outs_n);
      for (int64_t b = 0; b < batch; ++b) {
        std::vector<Tensor> bs(states_), bx(scans_);
        std::vector<const Tensor*> ps(states_), px(scans_);
        for (size_t k = 0; k < states_; ++k) ps[k] = &(bs[k] = SliceAlong(*st[k], 0, b));
        for (size_t j = 0; j < scans_; ++j) px[j] = &(bx[j] = SliceAlong(*sc[j], 0, b));
        const int64_t limit = lens ? lens->data<int64_t>()[b] : -1;
        std::vector<Tensor> fs, so;
        WH_RETURN_IF_ERROR(Run(ps, px, outer, limit, &fs, &so));
        for (size_t k = 0; k < states_; ++k) per_state[k].push_back(std::move(fs[k]));
        for (size_t k = 0; k < outs_n; ++k) per_out[k].push_back(std::move(so[k]));
      }
      for (size_t k = 0; k < states_; ++k) {
        if (batch == 0) return Unimplemented("Scan 8 over an empty batch");
        WH_ASSIGN_OR_RETURN(Tensor t, StackAlong(per_state[k], 0, "final state", k));
        final_states.push_back(std::move(t));
      }
      for (size_t k = 0; k < outs_n; ++k) {
        if (batch == 0) return Unimplemented("Scan 8 over an empty batch");
        WH_ASSIGN_OR_RETURN(Tensor t, StackAlong(per_out[k], 0, "scan output", k));
        scan_outs.push_back(std::move(t));
      }
    }
    SetOutputs(ctx, final_states, states_);
    for (size_t k = 0; k < outs_n; ++k)
      if (ctx.outputs[states_ + k]) *ctx.outputs[states_ + k] = std::move(scan_outs[k]);
    return Status::Ok();
  }

 private:
  // One scan: states and scan inputs (scan axis per in_axes_) in, final states and stacked scan
  // outputs out. limit >= 0 (Scan 8's sequence_lens): that many steps, the outputs' later steps zero.
  Status Run(const std::vector<const Tensor*>& st, const std::vector<const Tensor*>& sc,
             const std::vector<const Tensor*>& outer, int64_t limit, std::vector<Tensor>* final_states,
             std::vector<Tensor>* scan_outs) const {
    std::vector<int64_t> axes(scans_);
    int64_t len = -1;
    for (size_t j = 0; j < scans_; ++j) {
      WH_ASSIGN_OR_RETURN(axes[j], KernelAxis(in_axes_[j], sc[j]->rank()));
      const int64_t l = sc[j]->dims()[static_cast<size_t>(axes[j])];
      if (len >= 0 && l != len)
        return InvalidArgument("scan input " + std::to_string(j) + " has " + std::to_string(l) +
                               " steps along its scan axis, scan input 0 has " + std::to_string(len));
      len = l;
    }
    if (limit > len) return InvalidArgument("sequence_lens " + std::to_string(limit) + " exceeds the " + std::to_string(len) + " steps");
    const int64_t steps = limit >= 0 ? limit : len;
    std::vector<Tensor> state(states_);
    for (size_t k = 0; k < states_; ++k) state[k] = *st[k];
    const size_t outs_n = out_dirs_.size();
    std::vector<std::vector<Tensor>> parts(outs_n, std::vector<Tensor>(static_cast<size_t>(len)));
    std::vector<Tensor> slices(scans_);
    std::vector<const Tensor*> in(states_ + scans_);
    in.insert(in.end(), outer.begin(), outer.end());
    uint64_t gathered = 0;
    for (int64_t t = 0; t < steps; ++t) {
      WH_RETURN_IF_ERROR(IterationChecks(t, gathered));
      for (size_t k = 0; k < states_; ++k) in[k] = &state[k];
      for (size_t j = 0; j < scans_; ++j) {
        slices[j] = SliceAlong(*sc[j], axes[j], in_dirs_[j] ? steps - 1 - t : t);
        in[states_ + j] = &slices[j];
      }
      auto outs = body_->Run(in);
      if (!outs.ok()) return outs.status().WithContext("body, iteration " + std::to_string(t));
      if (outs->size() != states_ + outs_n) return Internal("Scan body output count differs from the node's");
      for (size_t k = 0; k < states_; ++k) state[k] = std::move((*outs)[k]);
      for (size_t k = 0; k < outs_n; ++k) {
        gathered += (*outs)[states_ + k].nbytes();
        parts[k][static_cast<size_t>(out_dirs_[k] ? steps - 1 - t : t)] = std::move((*outs)[states_ + k]);
      }
    }
    *final_states = std::move(state);
    scan_outs->clear();
    for (size_t k = 0; k < outs_n; ++k) {
      if (steps == 0) {
        Dims d = body_->OutputDimsOrEmpty(states_ + k);
        int64_t ax = out_axes_[k] < 0 ? out_axes_[k] + static_cast<int64_t>(d.size()) + 1 : out_axes_[k];
        ax = std::min<int64_t>(std::max<int64_t>(ax, 0), static_cast<int64_t>(d.size()));
        d.insert(d.begin() + ax, len);
        Tensor z(body_->OutputDType(states_ + k), d);
        if (z.nbytes()) std::memset(z.raw_data(), 0, z.nbytes());
        scan_outs->push_back(std::move(z));
        continue;
      }
      for (int64_t t = steps; t < len; ++t) {  // Scan 8 past a sequence's length: zeros
        Tensor z(parts[k][0].dtype(), parts[k][0].dims());
        if (z.nbytes()) std::memset(z.raw_data(), 0, z.nbytes());
        parts[k][static_cast<size_t>(t)] = std::move(z);
      }
      WH_ASSIGN_OR_RETURN(Tensor out, StackAlong(parts[k], out_axes_[k], "scan output", k));
      scan_outs->push_back(std::move(out));
    }
    return Status::Ok();
  }

  std::unique_ptr<SubgraphRunner> body_;
  bool batched_;
  size_t states_, scans_;
  std::vector<int64_t> in_dirs_, out_dirs_, in_axes_, out_axes_;
};

KernelOr MakeScan(const KernelInit& init) {
  const bool batched = init.opset < 9;
  const size_t lead = batched ? 1 : 0;
  const size_t explicit_all = ExplicitInputs(init, "body");
  if (explicit_all < lead) return InvalidArgument("Scan 8 needs input sequence_lens");
  const size_t explicit_in = explicit_all - lead;
  const int64_t m = init.attrs.GetInt("num_scan_inputs", 0);
  if (m < 1 || static_cast<size_t>(m) > explicit_in) return InvalidArgument("num_scan_inputs is out of range");
  const auto scans = static_cast<size_t>(m);
  const size_t states = explicit_in - scans;
  if (static_cast<size_t>(init.num_outputs) < states) return InvalidArgument("Scan has fewer outputs than states");
  const size_t outs = static_cast<size_t>(init.num_outputs) - states;
  auto list = [&](const char* name, size_t n) {
    std::vector<int64_t> v = init.attrs.GetInts(name, std::vector<int64_t>(n, 0));
    v.resize(n, 0);
    return v;
  };
  WH_ASSIGN_OR_RETURN(auto body, MakeRunner(init, "body"));
  return std::unique_ptr<OpKernel>(new ScanKernel(std::move(body), batched, states, scans,
                                                  list(batched ? "directions" : "scan_input_directions", scans),
                                                  list("scan_output_directions", outs), list("scan_input_axes", scans),
                                                  list("scan_output_axes", outs)));
}

// ---------------------------------------------------------------- SequenceMap

class SequenceMapKernel : public ControlFlowKernel {
 public:
  SequenceMapKernel(std::unique_ptr<SubgraphRunner> body, size_t explicit_inputs)
      : body_(std::move(body)), explicit_(explicit_inputs) {}

  Status Compute(KernelContext& ctx) const override {
    const Tensor* seq = ctx.inputs[0];
    if (!seq || !seq->is_sequence()) return InvalidArgument("input_sequence must be a sequence");
    const size_t len = seq->elements().size();
    for (size_t k = 1; k < explicit_; ++k) {
      const Tensor* t = ctx.inputs[k];
      if (!t) return InvalidArgument("additional input " + std::to_string(k) + " is missing");
      if (t->is_sequence() && t->elements().size() != len)
        return InvalidArgument("input " + std::to_string(k) + " has " + std::to_string(t->elements().size()) +
                               " elements, input_sequence " + std::to_string(len));
    }
    std::vector<std::vector<Tensor>> outs(ctx.outputs.size());
    std::vector<const Tensor*> in(ctx.inputs.begin(), ctx.inputs.end());
    for (size_t i = 0; i < len; ++i) {
      WH_RETURN_IF_ERROR(IterationChecks(static_cast<int64_t>(i), 0));
      for (size_t k = 0; k < explicit_; ++k)
        in[k] = ctx.inputs[k]->is_sequence() ? &ctx.inputs[k]->elements()[i] : ctx.inputs[k];
      auto r = body_->Run(in);
      if (!r.ok()) return r.status().WithContext("body, element " + std::to_string(i));
      if (r->size() != outs.size()) return Internal("SequenceMap body output count differs from the node's");
      for (size_t k = 0; k < outs.size(); ++k) {
        if (!(*r)[k].is_tensor()) return InvalidArgument("body output " + std::to_string(k) + " is not a tensor");
        outs[k].push_back(std::move((*r)[k]));
      }
    }
    for (size_t k = 0; k < outs.size(); ++k)
      if (ctx.outputs[k]) *ctx.outputs[k] = Tensor::Sequence(body_->OutputDType(k), std::move(outs[k]));
    return Status::Ok();
  }

 private:
  std::unique_ptr<SubgraphRunner> body_;
  size_t explicit_;
};

KernelOr MakeSequenceMap(const KernelInit& init) {
  const size_t explicit_in = ExplicitInputs(init, "body");
  if (explicit_in < 1) return InvalidArgument("SequenceMap needs input_sequence");
  WH_ASSIGN_OR_RETURN(auto body, MakeRunner(init, "body"));
  return std::unique_ptr<OpKernel>(new SequenceMapKernel(std::move(body), explicit_in));
}

}  // namespace

void SetSubgraphRunnerFactory(SubgraphRunnerFactory f) {
  std::lock_guard<std::mutex> lock(FactoryMu());
  Factory() = std::move(f);
}

void RegisterControlFlowKernels(KernelRegistry& r) {
  r.Add(DeclareKernel(Backend::kReference, "", "If", kAllTypes, MakeIf));
  r.Add(DeclareKernel(Backend::kReference, "", "Loop", kAllTypes, MakeLoop));
  r.Add(DeclareKernel(Backend::kReference, "", "Scan", kAllTypes, MakeScan, 8));
  r.Add(DeclareKernel(Backend::kReference, "", "SequenceMap", {}, MakeSequenceMap, 17));
}

}  // namespace whittle
