// Registers the Gemm and MatMul kernels: reference (plain loops, several dtypes) and fast CPU.
#include "kernels/cpu/linear.h"
#include "kernels/kernel.h"
#include "kernels/reference/linear.h"

namespace whittle {

void RegisterLinearKernels(KernelRegistry& r) {
  r.Register("", "Gemm", [](const KernelInit& init) {
    return init.backend == Backend::kCpu ? CreateGemmCpuKernel(init) : CreateGemmReferenceKernel(init);
  });
  r.Register("", "MatMul", [](const KernelInit& init) {
    return init.backend == Backend::kCpu ? CreateMatMulCpuKernel(init) : CreateMatMulReferenceKernel(init);
  });
}

}  // namespace whittle
