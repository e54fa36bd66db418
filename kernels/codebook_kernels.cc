// Kernel of ai.whittle CodebookMatMul (lib/ops/codebook.cc): the factory reads the attributes and,
// when the codebook and indices are constants (always, as compress-model writes them), checks
// every index against the codebook once at load; otherwise each call checks them.
#include <memory>
#include <string>

#include "kernels/kernel.h"
#include "kernels/reference/codebook.h"

namespace whittle {
namespace {

const BackendTable<CodebookFns> kCodebook{{Backend::kReference, &reference::kCodebookFns},
                                          {Backend::kCpu, &cpu::kCodebookFns}};

StatusOr<std::unique_ptr<OpKernel>> MakeCodebookMatMul(const KernelInit& init) {
  CodebookAttrs a;
  a.bits = init.attrs.GetInt("bits", 8);
  a.n = init.attrs.GetInt("out_features", 0);
  a.k = init.attrs.GetInt("in_features", 0);
  const bool consts = init.const_inputs.size() > 2 && init.const_inputs[1] && init.const_inputs[2];
  if (consts) {
    const Tensor* bias = init.const_inputs.size() > 3 ? init.const_inputs[3] : nullptr;
    Status s = CheckCodebookTensors(a, *init.const_inputs[1], *init.const_inputs[2], bias, true);
    if (!s.ok()) return InvalidArgument(init.node_name + ": " + s.message());
  }
  if (consts) return kCodebook.Make(init.backend, &CodebookFns::make, a, init);
  // Computed codebook or indices (not what compress-model writes): checked on every call.
  WH_ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> inner, kCodebook.Make(Backend::kReference, &CodebookFns::make, a, init));
  const std::string name = init.node_name;
  std::shared_ptr<OpKernel> k(std::move(inner));
  return WrapFnKernel([a, k, name](KernelContext& ctx) -> Status {
    Status s = CheckCodebookTensors(a, *ctx.inputs[1], *ctx.inputs[2], ctx.inputs.size() > 3 ? ctx.inputs[3] : nullptr, true);
    if (!s.ok()) return InvalidArgument(name + ": " + s.message());
    return k->Compute(ctx);
  });
}

}  // namespace

void RegisterCodebookKernels(KernelRegistry& r) { r.Register(kWhittleDomain, "CodebookMatMul", MakeCodebookMatMul); }

}  // namespace whittle
