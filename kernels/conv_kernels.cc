// Registers the Conv kernels: the reference (any rank, float/double) and the fast CPU one.
#include "kernels/cpu/conv.h"
#include "kernels/kernel.h"
#include "kernels/reference/conv.h"

namespace whittle {

void RegisterConvKernels(KernelRegistry& r) {
  r.Register("", "Conv", [](const KernelInit& init) {
    return init.backend == Backend::kCpu ? CreateConvCpuKernel(init) : CreateConvReferenceKernel(init);
  });
}

}  // namespace whittle
