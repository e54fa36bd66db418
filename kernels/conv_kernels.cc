// Registers the Conv and ConvTranspose kernels: attributes parsed and checked once here, then built by
// init.backend's builder (the reference: any rank, float/double; the fast CPU one: float32).
#include "kernels/common/window.h"
#include "kernels/cpu/conv.h"
#include "kernels/kernel.h"
#include "kernels/reference/conv.h"

namespace whittle {
namespace {

const BackendTable<ConvFns> kConv{{Backend::kReference, &reference::kConvFns}, {Backend::kCpu, &cpu::kConvFns}};

}  // namespace

void RegisterConvKernels(KernelRegistry& r) {
  DeclareFamily(r, kConv, &ConvFns::conv, "", "Conv", kFloatTypes, [](const KernelInit& init) -> KernelOr {
    WH_ASSIGN_OR_RETURN(ConvAttrs a, ParseConvAttrs(init));
    return kConv.Make(init.backend, &ConvFns::conv, a, init);
  });
  DeclareFamily(r, kConv, &ConvFns::conv_transpose, "", "ConvTranspose", kFloatTypes, [](const KernelInit& init) -> KernelOr {
    WH_ASSIGN_OR_RETURN(ConvTransposeAttrs a, ParseConvTransposeAttrs(init));
    return kConv.Make(init.backend, &ConvFns::conv_transpose, a, init);
  });
}

}  // namespace whittle
