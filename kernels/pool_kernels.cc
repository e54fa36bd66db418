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
    r.Register("", name, [k](const KernelInit& init) {
      return init.backend == Backend::kCpu ? CreatePoolCpuKernel(k, init) : CreatePoolReferenceKernel(k, init);
    });
  }
}

}  // namespace whittle
