// Registers the BatchNormalization and LayerNormalization kernels (reference and fast CPU).
#include "kernels/cpu/norm.h"
#include "kernels/kernel.h"
#include "kernels/reference/norm.h"

namespace whittle {

void RegisterNormKernels(KernelRegistry& r) {
  r.Register("", "BatchNormalization", [](const KernelInit& init) {
    return init.backend == Backend::kCpu ? CreateBatchNormCpuKernel(init) : CreateBatchNormReferenceKernel(init);
  });
  r.Register("", "LayerNormalization", [](const KernelInit& init) {
    return init.backend == Backend::kCpu ? CreateLayerNormCpuKernel(init) : CreateLayerNormReferenceKernel(init);
  });
}

}  // namespace whittle
