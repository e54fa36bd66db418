// The entry point of libwhittle_cuda.so, the CUDA backend as a module that
// kernels/backend_module.cc loads (dlopen) at the CUDA device's first use: it registers the
// backend's kernels into the library's registry and its device runtime (allocator, copies,
// streams, graphs). The module links libwhittle.so, so both are the library's own objects.
#include <string>

#include "kernels/backend_module.h"
#include "kernels/kernel.h"

namespace whittle::cuda {
void RegisterKernels(KernelRegistry& r);  // kernels/cuda/declare.cc
void RegisterRuntime();                   // kernels/cuda/runtime.cc
}  // namespace whittle::cuda

extern "C" __attribute__((visibility("default"))) const char* whittle_backend_module_init(const char* abi,
                                                                                          void* registry) {
  if (std::string(abi) != whittle::kBackendModuleAbi) return "built for another Whittle library";
  whittle::cuda::RegisterRuntime();
  whittle::cuda::RegisterKernels(*static_cast<whittle::KernelRegistry*>(registry));
  return nullptr;
}
