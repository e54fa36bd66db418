// Running one pass in a test the way compress-model does: options parsed from a spec string,
// the pass made by the registry, then the PassManager's output check (compact, re-infer
// shapes, verify), so a pass that leaves a broken graph fails the test that ran it.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "lib/ir/graph.h"
#include "lib/ir/status.h"
#include "passes/pass.h"
#include "passes/pass_manager.h"
#include "passes/pass_options.h"
#include "passes/pass_registry.h"

namespace whittle::testing {

inline StatusOr<PassReport> RunPass(Graph& g, const std::string& pass_name, const std::string& spec,
                                    const PassContext& ctx = {}) {
  WH_ASSIGN_OR_RETURN(PassOptions o, PassOptions::Parse(pass_name, spec));
  WH_ASSIGN_OR_RETURN(std::unique_ptr<Pass> pass, MakePass(pass_name, std::move(o)));
  WH_ASSIGN_OR_RETURN(PassReport r, pass->Run(g, ctx));
  WH_RETURN_IF_ERROR(CheckPassOutput(g));
  return r;
}

}  // namespace whittle::testing
