#include "passes/pass_manager.h"

#include <chrono>

#include "lib/ops/op_def.h"

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

// The pass on every subgraph of g (If branches, Loop and Scan bodies, nested ones too), each as a
// graph of its own and without calibration data (the data feeds the model's inputs, not a body's).
// Where the pass cannot run on a subgraph, that subgraph stays as it was and the report says why.
// Layers are reported as "<node>/<attribute>/<layer>".
Status RunOnSubgraphs(Pass& p, Graph& g, const PassContext& ctx, const std::string& prefix, PassReport* rep) {
  for (Node& n : g.nodes()) {
    for (const auto& [attr, sub] : n.attrs.Subgraphs()) {
      const std::string where = prefix + n.name + "/" + attr + "/";
      Graph work = *sub;
      PassContext sctx = ctx;
      sctx.calibration = nullptr;
      StatusOr<PassReport> r = p.Run(work, sctx);
      Status s = r.ok() ? CheckPassOutput(work) : r.status();
      if (!s.ok()) {
        rep->notes.push_back("subgraph " + where.substr(0, where.size() - 1) + " left as it was: " + s.message());
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
      WH_RETURN_IF_ERROR(RunOnSubgraphs(p, work, ctx, where, rep));
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
