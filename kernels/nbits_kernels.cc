// Kernel of com.microsoft MatMulNBits (lib/ops/nbits.cc): the factory reads the attributes and,
// when the weight operands are constants (as every quantizer writes them), checks them once at
// load; the backend's builder then runs (the CPU's reads the 4-bit codes in place). Otherwise the
// reference kernel checks them on each call. The CUDA backend declares its own in its module
// (kernels/cuda/nbits.cc); what it does not take runs on the CPU kernel with copies.
#include <memory>

#include "kernels/common/nbits.h"
#include "kernels/cpu/nbits.h"
#include "kernels/kernel.h"
#include "kernels/reference/nbits.h"
#include "lib/ir/domain.h"

namespace whittle {
namespace {

const BackendTable<NBitsFns> kNBits{{Backend::kReference, &reference::kNBitsFns}, {Backend::kCpu, &cpu::kNBitsFns}};

KernelOr MakeMatMulNBits(const KernelInit& init) {
  const NBitsAttrs a = NBitsAttrsOf(init.attrs);
  auto c = [&](size_t i) { return init.const_inputs.size() > i ? init.const_inputs[i] : nullptr; };
  if (c(1) && c(2)) {
    auto w = CheckNBitsOperands(a, *c(1), *c(2), c(3), c(4), c(5));
    if (!w.ok()) return InvalidArgument(init.node_name + ": " + w.status().message());
  }
  return kNBits.Make(init.backend, &NBitsFns::make, a, init);
}

}  // namespace

void RegisterNBitsKernels(KernelRegistry& r) {
  DeclareFamily(r, kNBits, &NBitsFns::make, kMicrosoftDomain, "MatMulNBits", {DType::kFloat32}, MakeMatMulNBits);
}

}  // namespace whittle
