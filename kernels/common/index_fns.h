// The contract between the indexing ops' glue (kernels/index_kernels.cc) and its backends:
// ScatterReduction and IndexFns, one instance per backend (the reference's in
// kernels/reference/index.h).
#pragma once

#include <cstdint>

#include "lib/ir/status.h"
#include "lib/ir/tensor.h"

namespace whittle {

enum class ScatterReduction { kNone, kAdd, kMul };

// The family's compute functions, one instance per backend (kernels/kernel.h BackendTable). Only
// the reference has them today; a backend adds its row to kIndex in kernels/index_kernels.cc.
struct IndexFns {
  Status (*size)(const Tensor& in, Tensor* out) = nullptr;
  Status (*gather_elements)(const Tensor& data, const Tensor& indices, int64_t axis, Tensor* out) = nullptr;
  Status (*trilu)(const Tensor& in, int64_t k, bool upper, Tensor* out) = nullptr;
  Status (*cum_sum)(const Tensor& in, int64_t axis, bool exclusive, bool reverse, Tensor* out) = nullptr;
  Status (*eye_like)(int64_t k, Tensor* out) = nullptr;
  Status (*one_hot)(const Tensor& indices, int64_t depth, const Tensor& values, int64_t axis, Tensor* out) = nullptr;
  Status (*depth_to_space)(const Tensor& in, int64_t blocksize, bool crd, Tensor* out) = nullptr;
  Status (*space_to_depth)(const Tensor& in, int64_t blocksize, bool crd, Tensor* out) = nullptr;
  Status (*top_k)(const Tensor& in, int64_t axis, bool largest, bool sorted, Tensor* values, Tensor* indices) = nullptr;
  Status (*gather_nd)(const Tensor& data, const Tensor& indices, int64_t batch_dims, Tensor* out) = nullptr;
  Status (*scatter_elements)(const Tensor& data, const Tensor& indices, const Tensor& updates, int64_t axis,
                             ScatterReduction red, Tensor* out) = nullptr;
  Status (*scatter_nd)(const Tensor& data, const Tensor& indices, const Tensor& updates, ScatterReduction red,
                       Tensor* out) = nullptr;
  Status (*non_zero)(const Tensor& in, Tensor* out) = nullptr;
};

}  // namespace whittle
