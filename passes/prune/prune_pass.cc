// PLACEHOLDER (helper replaces this file)
#include "passes/prune/prune_pass.h"
namespace whittle {
StatusOr<std::unique_ptr<Pass>> MakePrunePass(PassOptions) { return Unimplemented("--prune: not built yet"); }
const char* PrunePassHelp() { return "--prune: not built yet"; }
}  // namespace whittle
