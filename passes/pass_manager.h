// PassManager: runs passes in order on a copy of the graph. After every pass it compacts the
// graph, re-infers shapes and calls Verify(), so a pass that leaves a broken graph is caught at
// the pass that did it (the error names the pass). stop_after lets a user bisect a bad rewrite
// (run only the first N passes). The input graph is only replaced when every pass succeeded.
#pragma once

#include <memory>
#include <vector>

#include "passes/pass.h"

namespace whittle {

class PassManager {
 public:
  void Add(std::unique_ptr<Pass> pass) { passes_.push_back(std::move(pass)); }
  size_t size() const { return passes_.size(); }
  void set_stop_after(int n) { stop_after_ = n; }

  // On success *g is the rewritten graph and the reports come back in pass order; on error
  // *g is untouched.
  StatusOr<std::vector<PassReport>> Run(Graph* g, const PassContext& ctx) const;

 private:
  std::vector<std::unique_ptr<Pass>> passes_;
  int stop_after_ = -1;
};

// Compact + InferShapes + Verify: the check every pass output must pass. Shape inference
// starts from the declared input shapes; values' stale shapes are cleared first.
Status CheckPassOutput(Graph& g);

}  // namespace whittle
