#include "kernels/backend_module.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "kernels/kernel.h"
#include "lib/ir/device.h"

namespace whittle {
namespace {

std::atomic<bool> g_cuda_loaded{false};

// Why the CUDA module did not load (set once, by the loader, before the device's first use returns).
std::string& CudaLoadError() {
  static std::string why;
  return why;
}

#ifdef WHITTLE_WITH_CUDA
// The first use of the CUDA device (lib/ir/device.cc runs this once): the module's kernels wrap
// the CPU ones, so those are registered first; then the module registers its own and the runtime.
// A module that loaded stays loaded (its code is what the registry calls).
bool LoadCudaModule(std::string* why) {
  RegisterAllKernels();
  const std::string path = CudaModulePath();
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    // dlerror names the file that failed: the module, or a library it needs (cuBLAS, ...).
    const std::string err = dlerror();
    *why = CudaLoadError() = "CUDA backend unavailable: " + (err.rfind(path, 0) == 0 ? err : path + ": " + err);
    return false;
  }
  const auto init = reinterpret_cast<BackendModuleInit>(dlsym(h, kBackendModuleInitSymbol));
  const char* refused = init ? init(kBackendModuleAbi, &KernelRegistry::Global()) : "no entry point";
  if (refused) {
    *why = CudaLoadError() = "CUDA backend unavailable: " + path + ": " + refused;
    dlclose(h);
    return false;
  }
  g_cuda_loaded.store(true);
  return true;
}

// Before any use of the device: static initialization of the library that holds this code.
[[maybe_unused]] const bool kLoaderSet = (SetDeviceRuntimeLoader(DeviceType::kCuda, &LoadCudaModule), true);
#endif

// Where this code was loaded from: its folder, with the trailing '/' ("" if unknown).
std::string ThisLibraryFolder() {
  Dl_info info;
  if (!dladdr(reinterpret_cast<void*>(&ThisLibraryFolder), &info) || !info.dli_fname) return "";
  const char* slash = std::strrchr(info.dli_fname, '/');
  return slash ? std::string(info.dli_fname, static_cast<size_t>(slash - info.dli_fname) + 1) : "";
}

}  // namespace

std::string CudaModulePath() {
  if (const char* env = std::getenv("WHITTLE_CUDA_MODULE"); env && *env) return env;
  return ThisLibraryFolder() + "libwhittle_cuda.so";
}

bool CudaBackendLoaded(std::string* why) {
  DeviceRuntimeFor(DeviceType::kCuda);  // the device's first use loads the module
  if (g_cuda_loaded.load()) return true;
  if (why) *why = CudaLoadError();
  return false;
}

}  // namespace whittle
