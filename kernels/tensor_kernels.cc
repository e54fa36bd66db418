// PLACEHOLDER: replaced by the kernel family's registration.
#include "kernels/kernel.h"
namespace whittle {
void RegisterTensorKernels(KernelRegistry&) {}
}  // namespace whittle
