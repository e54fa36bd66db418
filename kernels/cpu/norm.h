// Fast CPU BatchNormalization (inference, float32): per channel y = x * a + b with a, b folded
// once at factory time when the parameters are constant (per plane otherwise), planes spread
// over threads when large. LayerNormalization (float32): two passes per row in float with
// vectorisable loops, rows spread over threads when large. Other cases use the reference kernels.
#pragma once

#include <memory>

#include "kernels/kernel.h"

namespace whittle {

StatusOr<std::unique_ptr<OpKernel>> CreateBatchNormCpuKernel(const KernelInit& init);
StatusOr<std::unique_ptr<OpKernel>> CreateLayerNormCpuKernel(const KernelInit& init);

}  // namespace whittle
