// Registers MaxPool, AveragePool, GlobalMaxPool and GlobalAveragePool: attributes parsed and
// checked once here, then built by init.backend's builder (reference where it has none or declines).
#include "kernels/common/window.h"
#include "kernels/cpu/pool.h"
#include "kernels/kernel.h"
#include "kernels/reference/pool.h"

namespace whittle {
namespace {

const BackendTable<PoolFns> kPool{{Backend::kReference, &reference::kPoolFns}, {Backend::kCpu, &cpu::kPoolFns}};

}  // namespace

void RegisterPoolKernels(KernelRegistry& r) {
  const std::pair<const char*, PoolKind> ops[] = {{"MaxPool", PoolKind::kMax},
                                                  {"AveragePool", PoolKind::kAverage},
                                                  {"GlobalMaxPool", PoolKind::kGlobalMax},
                                                  {"GlobalAveragePool", PoolKind::kGlobalAverage}};
  for (const auto& [name, kind] : ops) {
    const PoolKind k = kind;
    DeclareFamily(r, kPool, &PoolFns::pool, "", name, kFloatTypes, [k](const KernelInit& init) -> KernelOr {
      WH_ASSIGN_OR_RETURN(PoolAttrs a, ParsePoolAttrs(k, init));
      return kPool.Make(init.backend, &PoolFns::pool, a, init, reference::kPoolFns);
    });
  }
}

}  // namespace whittle
