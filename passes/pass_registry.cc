#include "passes/pass_registry.h"

#include "passes/prune/prune_pass.h"
#include "passes/quantize/int8_pass.h"
#include "passes/svd/svd_pass.h"

namespace whittle {

std::vector<std::string> PassNames() { return {"svd", "prune", "int8"}; }

const char* PassHelp(const std::string& name) {
  if (name == "svd") return SvdPassHelp();
  if (name == "prune") return PrunePassHelp();
  if (name == "int8") return Int8PassHelp();
  return "";
}

StatusOr<std::unique_ptr<Pass>> MakePass(const std::string& name, PassOptions options) {
  if (name == "svd") return MakeSvdPass(std::move(options));
  if (name == "prune") return MakePrunePass(std::move(options));
  if (name == "int8") return MakeInt8Pass(std::move(options));
  return NotFound("unknown pass '" + name + "'");
}

}  // namespace whittle
