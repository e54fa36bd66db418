// The contract between the shape ops' glue (kernels/shape_kernels.cc) and its backends:
// ShapeFns, one instance per backend (the reference's in kernels/reference/shape.h).
#pragma once

#include <cstdint>

#include "lib/ir/status.h"
#include "lib/ir/tensor.h"

namespace whittle {

// The family's compute functions, one instance per backend (kernels/kernel.h BackendTable). Only
// the reference has them today; a backend adds its row to kShape in kernels/shape_kernels.cc.
struct ShapeFns {
  Status (*shape)(const Tensor& in, int64_t start, int64_t end, Tensor* out) = nullptr;
  Status (*fill)(const Tensor& value, Tensor* out) = nullptr;
  Status (*dropout)(const Tensor& x, Tensor* y, Tensor* mask) = nullptr;
};

}  // namespace whittle
