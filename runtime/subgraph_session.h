// The runtime's side of control flow: If, Loop and Scan kernels (kernels/control_flow_kernels.cc)
// run each subgraph as a Session of its own, built once when the kernel is built (validated,
// inferred, rewritten and planned like any model), so iterations reuse that plan.
#pragma once

namespace whittle {

// Installs the subgraph runner factory (kernels/subgraph_runner.h); idempotent, thread-safe.
void InstallSubgraphSessions();

}  // namespace whittle
