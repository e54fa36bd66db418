#include "passes/pass_registry.h"

#include "passes/prune/prune_pass.h"
#include "passes/svd/svd_pass.h"

namespace whittle {

std::vector<std::string> PassNames() { return {"svd", "prune"}; }

const char* PassHelp(const std::string& name) {
  if (name == "svd") return SvdPassHelp();
  if (name == "prune") return PrunePassHelp();
  return "";
}

StatusOr<std::unique_ptr<Pass>> MakePass(const std::string& name, PassOptions options) {
  if (name == "svd") return MakeSvdPass(std::move(options));
  if (name == "prune") return MakePrunePass(std::move(options));
  return NotFound("unknown pass '" + name + "'");
}

}  // namespace whittle
