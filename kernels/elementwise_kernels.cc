// PLACEHOLDER: replaced by the kernel family's registration.
#include "kernels/kernel.h"
namespace whittle {
void RegisterElementwiseKernels(KernelRegistry&) {}
}  // namespace whittle
