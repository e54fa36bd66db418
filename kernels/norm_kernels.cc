// Registers the BatchNormalization and LayerNormalization kernels (reference and fast CPU).
#include "kernels/cpu/norm.h"
#include "kernels/kernel.h"
#include "kernels/reference/norm.h"

namespace whittle {

void RegisterNormKernels(KernelRegistry& r) {
  r.Register(Provider::kReference, "", "BatchNormalization", CreateBatchNormReferenceKernel);
  r.Register(Provider::kCpu, "", "BatchNormalization", CreateBatchNormCpuKernel);
  r.Register(Provider::kReference, "", "LayerNormalization", CreateLayerNormReferenceKernel);
  r.Register(Provider::kCpu, "", "LayerNormalization", CreateLayerNormCpuKernel);
}

}  // namespace whittle
