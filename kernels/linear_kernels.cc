// Registers the Gemm, MatMul and Einsum kernels: attributes parsed and checked once here, then built by
// init.backend's builder (the reference: plain loops, several dtypes; the fast CPU one: float32).
#include "kernels/cpu/linear.h"
#include "kernels/kernel.h"
#include "kernels/reference/linear.h"

namespace whittle {
namespace {

const BackendTable<LinearFns> kLinear{{Backend::kReference, &reference::kLinearFns},
                                      {Backend::kCpu, &cpu::kLinearFns}};

}  // namespace

void RegisterLinearKernels(KernelRegistry& r) {
  DeclareFamily(r, kLinear, &LinearFns::gemm, "", "Gemm", kNumericTypes, [](const KernelInit& init) -> KernelOr {
    WH_ASSIGN_OR_RETURN(GemmAttrs a, ParseGemmAttrs(init));
    return kLinear.Make(init.backend, &LinearFns::gemm, a, init);
  });
  DeclareFamily(r, kLinear, &LinearFns::matmul, "", "MatMul", kNumericTypes, [](const KernelInit& init) -> KernelOr {
    WH_ASSIGN_OR_RETURN(MatMulAttrs a, ParseMatMulAttrs(init));
    return kLinear.Make(init.backend, &LinearFns::matmul, a, init);
  });
  DeclareFamily(r, kLinear, &LinearFns::einsum, "", "Einsum", kNumericTypes, [](const KernelInit& init) -> KernelOr {
    WH_ASSIGN_OR_RETURN(EinsumAttrs a, ParseEinsumAttrs(init));
    return kLinear.Make(init.backend, &LinearFns::einsum, a, init);
  });
}

}  // namespace whittle
