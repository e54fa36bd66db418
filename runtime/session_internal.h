// What runtime/, passes/, tools/ and tests/ may know of a Session beyond its public API
// (include/whittle/session.h): the graph it executes, after the runtime's rewrites (the passes'
// cost and calibration code, run-model's summary, and the rewrite tests read it).
#pragma once

#include "lib/ir/graph.h"
#include "whittle/session.h"

namespace whittle {

const Graph& SessionGraph(const Session& s);

}  // namespace whittle
