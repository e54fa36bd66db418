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

StatusOr<std::vector<PassReport>> PassManager::Run(Graph* g, const PassContext& ctx) const {
  Graph work = *g;
  std::vector<PassReport> reports;
  for (size_t i = 0; i < passes_.size(); ++i) {
    if (stop_after_ >= 0 && static_cast<int>(i) >= stop_after_) break;
    Pass& p = *passes_[i];
    auto t0 = std::chrono::steady_clock::now();
    StatusOr<PassReport> r = p.Run(work, ctx);
    if (!r.ok()) return Status(r.status().code(), "pass " + p.name() + ": " + r.status().message());
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
