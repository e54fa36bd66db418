// Registers MaxPool, AveragePool, GlobalMaxPool and GlobalAveragePool (reference and fast CPU).
#include "kernels/cpu/pool.h"
#include "kernels/kernel.h"
#include "kernels/reference/pool.h"

namespace whittle {

void RegisterPoolKernels(KernelRegistry& r) {
  const std::pair<const char*, PoolKind> ops[] = {{"MaxPool", PoolKind::kMax},
                                                  {"AveragePool", PoolKind::kAverage},
                                                  {"GlobalMaxPool", PoolKind::kGlobalMax},
                                                  {"GlobalAveragePool", PoolKind::kGlobalAverage}};
  for (const auto& [name, kind] : ops) {
    const PoolKind k = kind;
    r.Register(Provider::kReference, "", name, [k](const KernelInit& init) { return CreatePoolReferenceKernel(k, init); });
    r.Register(Provider::kCpu, "", name, [k](const KernelInit& init) { return CreatePoolCpuKernel(k, init); });
  }
}

}  // namespace whittle
