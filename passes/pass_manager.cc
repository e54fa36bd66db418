#include "passes/pass_manager.h"

#include <chrono>
#include <cstring>
#include <optional>

#include "lib/ops/op_def.h"
#include "runtime/evaluate.h"
#include "whittle/session.h"

namespace whittle {

Status CheckPassOutput(Graph& g) {
  WH_RETURN_IF_ERROR(g.Compact());
  for (Value& v : g.values()) {
    // Inputs keep their declared shapes, initializers their tensors; everything computed is
    // re-derived so a pass cannot leave a stale shape behind.
    bool is_input = false;
    for (int id : g.inputs()) is_input |= (&g.value(id) == &v);
    if (!is_input && !v.initializer && v.producer >= 0) v.shape.reset();
  }
  WH_RETURN_IF_ERROR(InferShapes(g));
  return g.Verify();
}

namespace {

// Calibration data for the branches of If node n of g: the outer values they read, as g computes
// them on `data`, one call per data sample (calls: data, Dataset::calls), named as the branches
// name them. A Loop or Scan body's inputs change from one iteration to the next and are not seen
// from outside: none for them.
StatusOr<Dataset> BranchCalibration(const Graph& g, const Node& n, const Dataset& data, int num_threads) {
  if (n.op_type != "If" || !n.domain.empty()) return Unimplemented("no calibration data reaches a Loop or Scan body");
  const Graph* branch = n.attrs.GetGraph("then_branch");
  if (!branch || n.implicit_inputs == 0) return Unimplemented("the branches read no value of the enclosing graph");
  for (int j = 0; j < n.implicit_inputs; ++j) {
    const int v = n.inputs[n.explicit_inputs() + static_cast<size_t>(j)];
    if (v >= 0 && g.value(v).kind != ValueKind::kTensor)
      return Unimplemented("the branches read '" + g.value(v).name + "', a " + ValueKindName(g.value(v).kind) +
                           ", which calibration data cannot hold");
  }
  Graph probe = g;
  std::vector<size_t> slot;  // probe output index per implicit input (-1: a constant)
  for (int j = 0; j < n.implicit_inputs; ++j) {
    const int v = n.inputs[n.explicit_inputs() + static_cast<size_t>(j)];
    size_t at = probe.outputs().size();
    for (size_t o = 0; o < probe.outputs().size(); ++o)
      if (probe.outputs()[o] == v) at = o;
    if (at == probe.outputs().size()) probe.outputs().push_back(v);
    slot.push_back(at);
  }
  SessionOptions so;
  so.num_threads = num_threads > 0 ? num_threads : 1;
  WH_ASSIGN_OR_RETURN(auto session, Session::FromGraph(std::move(probe), so));
  const int64_t calls = data.size();
  std::vector<std::vector<Tensor>> seen(slot.size());
  for (int64_t c = 0; c < calls; ++c) {
    WH_ASSIGN_OR_RETURN(auto feeds, BatchFeeds(data, session->inputs(), c, c + 1));
    WH_ASSIGN_OR_RETURN(std::vector<Tensor> outs, session->Run(feeds));
    for (size_t j = 0; j < slot.size(); ++j) {
      const Tensor& t = outs[slot[j]];
      if (!seen[j].empty() && (t.dims() != seen[j][0].dims() || t.dtype() != seen[j][0].dtype()))
        return InvalidArgument("outer value " + std::to_string(j) + " changes shape between samples");
      seen[j].push_back(t);
    }
  }
  Dataset d;
  d.calls = true;
  for (size_t j = 0; j < slot.size(); ++j) {
    const Tensor& t0 = seen[j][0];
    Dims dims{calls};
    dims.insert(dims.end(), t0.dims().begin(), t0.dims().end());
    Tensor stacked(t0.dtype(), dims);
    for (int64_t c = 0; c < calls; ++c)
      std::memcpy(static_cast<char*>(stacked.raw_data()) + static_cast<size_t>(c) * t0.nbytes(),
                  seen[j][static_cast<size_t>(c)].raw_data(), t0.nbytes());
    const std::string& name = branch->value(branch->inputs()[branch->formal_inputs() + j]).name;
    d.named.emplace_back(name, std::move(stacked));
  }
  d.inputs = d.named[0].second;
  d.description = "the values " + n.name + "'s branches read, on " + std::to_string(calls) + " calibration samples";
  return d;
}

// The pass on every subgraph of g (If branches, Loop and Scan bodies, nested ones too), each as a
// graph of its own and without calibration data (the data feeds the model's inputs, not a body's).
// Where the pass cannot run on a subgraph, that subgraph stays as it was and the report says why.
// Layers are reported as "<node>/<attribute>/<layer>".
Status RunOnSubgraphs(Pass& p, Graph& g, const PassContext& ctx, const std::string& prefix, PassReport* rep) {
  for (Node& n : g.nodes()) {
    // An If's branches calibrate on the values they read, as the enclosing graph makes them.
    std::optional<Dataset> branch_data;
    std::string no_data;
    if (ctx.calibration && ctx.calibration->size() > 0 && !n.attrs.Subgraphs().empty()) {
      auto d = BranchCalibration(g, n, *ctx.calibration, ctx.num_threads);
      if (d.ok()) branch_data = std::move(*d);
      else no_data = d.status().message();
    }
    for (const auto& [attr, sub] : n.attrs.Subgraphs()) {
      const std::string where = prefix + n.name + "/" + attr + "/";
      Graph work = *sub;
      PassContext sctx = ctx;
      sctx.calibration = branch_data ? &*branch_data : nullptr;
      StatusOr<PassReport> r = p.Run(work, sctx);
      Status s = r.ok() ? CheckPassOutput(work) : r.status();
      bool has_weights = false;  // a subgraph without a weight loses nothing by being left
      for (const Value& v : sub->values()) has_weights |= v.is_constant() && v.initializer->rank() >= 2;
      if (!s.ok() && !has_weights) {
        work = *sub;
      } else if (!s.ok()) {
        rep->notes.push_back("subgraph " + where.substr(0, where.size() - 1) + " left as it was: " + s.message() +
                             (no_data.empty() || !ctx.calibration ? "" : " (no calibration data for it: " + no_data + ")"));
        work = *sub;
      } else {
        for (LayerReport& l : r->layers) {
          l.node = where + l.node;
          rep->layers.push_back(std::move(l));
        }
        // A subgraph with no layer the pass looks at stays out of the report.
        if (!r->layers.empty())
          for (const std::string& note : r->notes) rep->notes.push_back(where.substr(0, where.size() - 1) + ": " + note);
      }
      WH_RETURN_IF_ERROR(RunOnSubgraphs(p, work, sctx, where, rep));
      *sub = std::move(work);
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::vector<PassReport>> PassManager::Run(Graph* g, const PassContext& ctx) const {
  Graph work = *g;
  std::vector<PassReport> reports;
  for (size_t i = 0; i < passes_.size(); ++i) {
    if (stop_after_ >= 0 && static_cast<int>(i) >= stop_after_) break;
    Pass& p = *passes_[i];
    auto t0 = std::chrono::steady_clock::now();
    StatusOr<PassReport> r = p.Run(work, ctx);
    if (!r.ok()) return Status(r.status().code(), "pass " + p.name() + ": " + r.status().message());
    WH_RETURN_IF_ERROR(RunOnSubgraphs(p, work, ctx, "", &*r));
    Status s = CheckPassOutput(work);
    if (!s.ok())
      return Internal("pass " + p.name() + " left an invalid graph (a bug in the pass): " + s.message());
    PassReport rep = std::move(r).value();
    rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    reports.push_back(std::move(rep));
  }
  *g = std::move(work);
  return reports;
}

}  // namespace whittle
