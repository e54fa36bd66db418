// Kernel of ai.whittle CodebookMatMul (lib/ops/codebook.cc): the factory reads the attributes and,
// when the codebook and indices are constants (always, as compress-model writes them), checks
// every index against the codebook once at load; otherwise each call checks them.
#include <algorithm>
#include <memory>
#include <string>

#include "kernels/cpu/codebook.h"
#include "kernels/kernel.h"
#include "kernels/reference/codebook.h"

namespace whittle {
namespace {

const BackendTable<CodebookFns> kCodebook{{Backend::kReference, &reference::kCodebookFns},
                                          {Backend::kCpu, &cpu::kCodebookFns}};

StatusOr<std::unique_ptr<OpKernel>> MakeCodebookMatMul(const KernelInit& init) {
  const CodebookAttrs a = CodebookAttrsOf(init.attrs);
  const Tensor* cb = init.const_inputs.size() > 1 ? init.const_inputs[1] : nullptr;
  const Tensor* idx = init.const_inputs.size() > 2 ? init.const_inputs[2] : nullptr;
  const Tensor* bias = init.const_inputs.size() > 3 ? init.const_inputs[3] : nullptr;
  if (cb && idx) {
    Status s = CheckCodebookTensors(a, *cb, *idx, bias, true);
    if (!s.ok()) return InvalidArgument(init.node_name + ": " + s.message());
    return kCodebook.Make(init.backend, &CodebookFns::make, a, init);
  }
  const std::string name = init.node_name;
  if (idx) {
    // Constant indices, a computed codebook (a training graph, where the codebook is a param):
    // the indices are checked once against the largest codebook the bits allow, the codebook's
    // length per call against the largest index.
    Tensor full(DType::kFloat32, {int64_t{1} << a.bits});
    Status s = CheckCodebookTensors(a, full, *idx, nullptr, false);
    if (!s.ok()) return InvalidArgument(name + ": " + s.message());
    int64_t top = 0;
    for (int64_t e = 0; e < a.n * a.k; ++e) top = std::max<int64_t>(top, CodebookIndexAt(idx->data<uint8_t>(), e, a.bits));
    WH_ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> inner, kCodebook.Make(init.backend, &CodebookFns::make, a, init));
    std::shared_ptr<OpKernel> k(std::move(inner));
    return WrapFnKernel([a, k, name, top](KernelContext& ctx) -> Status {
      const Tensor& c = *ctx.inputs[1];
      const Tensor* b = ctx.inputs.size() > 3 ? ctx.inputs[3] : nullptr;
      if (c.dtype() != DType::kFloat32 || c.rank() != 1 || c.numel() <= top || c.numel() > (int64_t{1} << a.bits))
        return InvalidArgument(name + ": the codebook " + DimsToString(c.dims()) + " does not cover index " +
                               std::to_string(top) + " (or exceeds " + std::to_string(int64_t{1} << a.bits) + " entries)");
      if (b && (b->dtype() != DType::kFloat32 || b->numel() != a.n))
        return InvalidArgument(name + ": the bias must be float32 [" + std::to_string(a.n) + "]");
      return k->Compute(ctx);
    });
  }
  // Computed indices (not what compress-model writes): checked on every call.
  WH_ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> inner, kCodebook.Make(Backend::kReference, &CodebookFns::make, a, init));
  std::shared_ptr<OpKernel> k(std::move(inner));
  return WrapFnKernel([a, k, name](KernelContext& ctx) -> Status {
    Status s = CheckCodebookTensors(a, *ctx.inputs[1], *ctx.inputs[2], ctx.inputs.size() > 3 ? ctx.inputs[3] : nullptr, true);
    if (!s.ok()) return InvalidArgument(name + ": " + s.message());
    return k->Compute(ctx);
  });
}

}  // namespace

void RegisterCodebookKernels(KernelRegistry& r) {
  DeclareFamily(r, kCodebook, &CodebookFns::make, kWhittleDomain, "CodebookMatMul", {DType::kFloat32}, MakeCodebookMatMul);
}

}  // namespace whittle
