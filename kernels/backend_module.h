// Backends built as shared modules and loaded on demand (dlopen), as ONNX Runtime loads its CUDA
// provider: the CUDA backend is libwhittle_cuda.so, installed next to libwhittle.so. Nothing maps
// it (nor cudart, cuBLAS, cuFFT) until the CUDA device is first used — a CUDA session, a device
// tensor, BuiltBackends — so CPU runs never load a CUDA library and run where none is installed.
// WHITTLE_CUDA_MODULE=path names the module to load instead.
#pragma once

#include <string>

namespace whittle {

// The module's entry point, exported as extern "C" by kernels/cuda/module_entry.cc: it registers
// the backend's kernels into *registry (a KernelRegistry*) and its device runtime. abi: the
// loader's kBackendModuleAbi; returns null, or why it refuses (a module of another build).
using BackendModuleInit = const char* (*)(const char* abi, void* registry);
inline constexpr const char* kBackendModuleInitSymbol = "whittle_backend_module_init";
// What a module and the library it is loaded into must agree on: this contract's version and the
// compiler that built both (the module calls the library's C++ functions).
inline constexpr const char* kBackendModuleAbi = "whittle backend module 1; " __VERSION__;

// Whether the CUDA module is loaded (loading it now if it never was); *why says why not (one line,
// "CUDA backend unavailable: ..."). False without a word in a build without the CUDA backend.
bool CudaBackendLoaded(std::string* why = nullptr);

// The module file the loader opens: $WHITTLE_CUDA_MODULE, else libwhittle_cuda.so in the folder of
// the library (or program) this code is linked into.
std::string CudaModulePath();

}  // namespace whittle
