// How a control-flow kernel (If, Loop, Scan: kernels/control_flow_kernels.cc) runs its subgraphs.
// Kernels never see a graph; the runtime, which can plan and run one, installs the factory that
// turns a subgraph into a SubgraphRunner (runtime/subgraph_session.cc: one Session per subgraph,
// planned once at load, so an iteration does not plan again). Until a runtime has installed it,
// control-flow kernels refuse to build.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "kernels/kernel.h"

namespace whittle {

class Graph;

class SubgraphRunner {
 public:
  virtual ~SubgraphRunner() = default;
  // Runs the subgraph on its inputs in order (its formal inputs, then the outer values it reads)
  // and returns its outputs as host tensors. Const and thread-safe, like Session::Run.
  virtual StatusOr<std::vector<Tensor>> Run(const std::vector<const Tensor*>& inputs) const = 0;
  // The subgraph's declared output k: its dtype and, where every dim is known, its dims (a Loop
  // that runs no iteration makes its scan outputs from these).
  virtual DType OutputDType(size_t k) const = 0;
  virtual std::vector<int64_t> OutputDimsOrEmpty(size_t k) const = 0;
};

using SubgraphRunnerFactory =
    std::function<StatusOr<std::unique_ptr<SubgraphRunner>>(const Graph& subgraph, const KernelInit& init)>;

// Installed once by the runtime (Session::Load does it); thread-safe.
void SetSubgraphRunnerFactory(SubgraphRunnerFactory f);

}  // namespace whittle
