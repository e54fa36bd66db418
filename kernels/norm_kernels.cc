// Registers the BatchNormalization, LayerNormalization, InstanceNormalization and
// GroupNormalization kernels: attributes parsed and checked
// once here, then built by init.backend's builder (reference where it has none or declines).
#include "kernels/common/norm_shape.h"
#include "kernels/cpu/norm.h"
#include "kernels/kernel.h"
#include "kernels/reference/norm.h"

namespace whittle {
namespace {

const BackendTable<NormFns> kNorm{{Backend::kReference, &reference::kNormFns}, {Backend::kCpu, &cpu::kNormFns}};

}  // namespace

void RegisterNormKernels(KernelRegistry& r) {
  DeclareFamily(r, kNorm, &NormFns::batch_norm, "", "BatchNormalization", kFloatTypes, [](const KernelInit& init) -> KernelOr {
    WH_ASSIGN_OR_RETURN(BatchNormAttrs a, ParseBatchNormAttrs(init));
    return kNorm.Make(init.backend, &NormFns::batch_norm, a, init);
  });
  DeclareFamily(r, kNorm, &NormFns::layer_norm, "", "LayerNormalization", kFloatTypes, [](const KernelInit& init) -> KernelOr {
    WH_ASSIGN_OR_RETURN(LayerNormAttrs a, ParseLayerNormAttrs(init));
    return kNorm.Make(init.backend, &NormFns::layer_norm, a, init);
  });
  DeclareFamily(r, kNorm, &NormFns::instance_norm, "", "InstanceNormalization", kFloatTypes, [](const KernelInit& init) -> KernelOr {
    WH_ASSIGN_OR_RETURN(ChannelNormAttrs a, ParseInstanceNormAttrs(init));
    return kNorm.Make(init.backend, &NormFns::instance_norm, a, init);
  });
  DeclareFamily(r, kNorm, &NormFns::group_norm, "", "GroupNormalization", kFloatTypes, [](const KernelInit& init) -> KernelOr {
    WH_ASSIGN_OR_RETURN(ChannelNormAttrs a, ParseGroupNormAttrs(init));
    return kNorm.Make(init.backend, &NormFns::group_norm, a, init);
  });
}

}  // namespace whittle
