#include "passes/pass_registry.h"

#include "passes/binarize/binarize_pass.h"
#include "passes/circulant/circulant_pass.h"
#include "passes/cluster/cluster_pass.h"
#include "passes/prune/prune_pass.h"
#include "passes/quantize/int8_pass.h"
#include "passes/quantize/weight_only.h"
#include "passes/svd/svd_pass.h"

namespace whittle {
namespace {

// One row per pass, in the order --help lists them. A new pass is its folder plus one row here.
const PassEntry kPasses[] = {
    {"svd", SvdPassHelp, MakeSvdPass},
    {"prune", PrunePassHelp, MakePrunePass},
    {"int8", Int8PassHelp, MakeInt8Pass},
    {"int4", Int4PassHelp, MakeInt4Pass},
    {"cluster", ClusterPassHelp, MakeClusterPass},
    {"binarize", BinarizePassHelp, MakeBinarizePass},
    {"circulant", CirculantPassHelp, MakeCirculantPass},
};

const PassEntry* FindPass(const std::string& name) {
  for (const PassEntry& e : kPasses)
    if (name == e.name) return &e;
  return nullptr;
}

}  // namespace

std::vector<std::string> PassNames() {
  std::vector<std::string> names;
  for (const PassEntry& e : kPasses) names.push_back(e.name);
  return names;
}

const char* PassHelp(const std::string& name) {
  const PassEntry* e = FindPass(name);
  return e ? e->help() : "";
}

StatusOr<std::unique_ptr<Pass>> MakePass(const std::string& name, PassOptions options) {
  const PassEntry* e = FindPass(name);
  if (!e) return NotFound("unknown pass '" + name + "'");
  return e->make(std::move(options));
}

}  // namespace whittle
