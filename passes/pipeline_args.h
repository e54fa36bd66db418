// compress-model's arguments turned into the pipeline's options, shared by the CLI and the Python
// module (python/src): the pass specs in the order given become PipelineSteps (consecutive repeats
// of one pass merge into one step), and the accuracy-aware search's arguments become
// SearchOptions, with the same checks and the same one-line errors (they name the CLI's flags).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lib/ir/status.h"
#include "passes/pipeline.h"
#include "passes/search/search.h"

namespace whittle {

// One pass flag as given: `--svd ratio=0.5` is {"svd", "ratio=0.5"}; `--int8` alone is {"int8", ""}.
struct PassArg {
  std::string pass, spec;
};

// The steps in order; a pass repeated right after itself merges into the previous step (later keys
// win). Errors: a bad spec or a failed merge (PassOptions' messages).
StatusOr<std::vector<PipelineStep>> ParsePipelineSteps(const std::vector<PassArg>& args);

// compress-model --target and the flags that go with it.
struct SearchArgs {
  std::string target;        // size, latency or macs
  double max_drop = -1;      // < 0: not given (an error)
  std::string metric;        // "" = the default
  std::string passes;        // the families, comma-separated; "" = the pass flags given, else the default five
  std::string sensitivity_cache;
  int max_evals = 8;
  int64_t latency_batch = 1;
  int stop_after = -1;       // --stop-after (refused with a search)
};

// The search's options from its arguments and the pass flags given with it (their specs become
// the families' base options). The caller runs the search instead of `steps`.
StatusOr<search::SearchOptions> MakeSearchOptions(const SearchArgs& args, const std::vector<PipelineStep>& steps);

}  // namespace whittle
