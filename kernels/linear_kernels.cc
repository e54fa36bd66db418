// Registers the Gemm and MatMul kernels: reference (plain loops, several dtypes) and fast CPU.
#include "kernels/cpu/linear.h"
#include "kernels/kernel.h"
#include "kernels/reference/linear.h"

namespace whittle {

void RegisterLinearKernels(KernelRegistry& r) {
  r.Register(Provider::kReference, "", "Gemm", CreateGemmReferenceKernel);
  r.Register(Provider::kCpu, "", "Gemm", CreateGemmCpuKernel);
  r.Register(Provider::kReference, "", "MatMul", CreateMatMulReferenceKernel);
  r.Register(Provider::kCpu, "", "MatMul", CreateMatMulCpuKernel);
}

}  // namespace whittle
