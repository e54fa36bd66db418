// Kernel of ai.whittle BlockCirculantMatMul (lib/ops/circulant.cc): the factory reads the
// attributes and checks them, the block vectors and the bias at load when they are constants
// (always, as compress-model writes them: the CPU kernel transforms the blocks once at load),
// otherwise on every call (the CPU kernel then transforms them per call). Also the kernel of
// BlockCirculantMatMulGradWeight, the blocks' gradient fine-tuning runs (through FFTs on the CPU).
#include <memory>
#include <string>

#include "kernels/cpu/circulant.h"
#include "kernels/kernel.h"
#include "kernels/reference/circulant.h"

namespace whittle {
namespace {

const BackendTable<CirculantFns> kCirculant{{Backend::kReference, &reference::kCirculantFns},
                                            {Backend::kCpu, &cpu::kCirculantFns}};

StatusOr<std::unique_ptr<OpKernel>> MakeBlockCirculantMatMul(const KernelInit& init) {
  const CirculantAttrs a = CirculantAttrsOf(init.attrs);
  if (Status s = CheckCirculantAttrs(a); !s.ok()) return InvalidArgument(init.node_name + ": " + s.message());
  const Tensor* bias = init.const_inputs.size() > 2 ? init.const_inputs[2] : nullptr;
  const bool bias_known = init.input_dtypes.size() < 3 || init.input_dtypes[2] == DType::kUndefined || bias;
  const bool consts = init.const_inputs.size() > 1 && init.const_inputs[1] && bias_known;
  if (consts) {
    Status s = CheckCirculantTensors(a, *init.const_inputs[1], bias);
    if (!s.ok()) return InvalidArgument(init.node_name + ": " + s.message());
    return kCirculant.Make(init.backend, &CirculantFns::make, a, init);
  }
  // Computed blocks or bias (a training graph's params, a gradient's transposed blocks): the FFT
  // kernel transforms them per call; both kernels check them on every call.
  WH_ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> inner, kCirculant.Make(init.backend, &CirculantFns::make, a, init));
  const std::string name = init.node_name;
  std::shared_ptr<OpKernel> k(std::move(inner));
  return WrapFnKernel([a, k, name](KernelContext& ctx) -> Status {
    Status s = CheckCirculantTensors(a, *ctx.inputs[1], ctx.inputs.size() > 2 ? ctx.inputs[2] : nullptr);
    if (!s.ok()) return InvalidArgument(name + ": " + s.message());
    return k->Compute(ctx);
  });
}

StatusOr<std::unique_ptr<OpKernel>> MakeBlockCirculantMatMulGradWeight(const KernelInit& init) {
  const CirculantAttrs a = CirculantAttrsOf(init.attrs);
  if (Status s = CheckCirculantAttrs(a); !s.ok()) return InvalidArgument(init.node_name + ": " + s.message());
  return kCirculant.Make(init.backend, &CirculantFns::grad_weight, a, init);
}

}  // namespace

void RegisterCirculantKernels(KernelRegistry& r) {
  DeclareFamily(r, kCirculant, &CirculantFns::make, kWhittleDomain, "BlockCirculantMatMul", {DType::kFloat32}, MakeBlockCirculantMatMul);
  DeclareFamily(r, kCirculant, &CirculantFns::grad_weight, kWhittleDomain, "BlockCirculantMatMulGradWeight", {DType::kFloat32}, MakeBlockCirculantMatMulGradWeight);
}

}  // namespace whittle
