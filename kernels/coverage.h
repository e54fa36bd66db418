// The kernel coverage table, read from the registry's declarations (kernels/kernel.h KernelDef):
// per op, which backends declare a kernel, for which opsets and input-0 element types. What
// `run-model --list-ops` prints and docs/kernels.md holds (scripts/gen-kernels-md.sh). A backend
// without a declaration of its own runs the reference declaration's kernel ("ref" in the table).
#pragma once

#include <functional>
#include <string>

#include "kernels/kernel.h"

namespace whittle {

// The oldest opset of an op's schema (1 where the caller does not know it): the table's
// open-ended opset ranges start there rather than at 1.
using SchemaSince = std::function<int(const std::string& domain, const std::string& op_type)>;

// The table of r's declarations, sorted by domain and op: plain text (one row per op, one column
// per built backend), or with json one JSON array of {domain, op, backend, opsets, dtypes}.
std::string KernelCoverage(const KernelRegistry& r, bool json, const SchemaSince& since = nullptr);

}  // namespace whittle
