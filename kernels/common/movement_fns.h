// The contract between the data-movement glue (kernels/movement_kernels.cc) and its backends:
// MovementFns, one instance per backend (reference::kMovementFns in kernels/reference/movement.h,
// cpu::kMovementFns in kernels/cpu/movement.h).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/common/index.h"
#include "lib/ir/status.h"
#include "lib/ir/tensor.h"

namespace whittle {

// The family's compute functions, one instance per backend (kernels/kernel.h BackendTable); a
// null member means "use the reference's". `threads` is the intra-op budget a backend may use.
struct MovementFns {
  Status (*transpose)(const Tensor& in, const std::vector<int64_t>& perm, Tensor* out, int threads) = nullptr;
  Status (*concat)(const std::vector<const Tensor*>& ins, int64_t axis, Tensor* out, int threads) = nullptr;
  Status (*split)(const Tensor& in, int64_t axis, const std::vector<Tensor*>& outs, int threads) = nullptr;
  Status (*slice)(const Tensor& in, const SliceParams& p, Tensor* out, int threads) = nullptr;
  Status (*gather)(const Tensor& data, const Tensor& indices, int64_t axis, Tensor* out, int threads) = nullptr;
  Status (*expand)(const Tensor& in, Tensor* out, int threads) = nullptr;
  Status (*pad)(const Tensor& in, const std::vector<int64_t>& pads, PadMode mode, uint64_t value_bits, Tensor* out,
                int threads) = nullptr;
  Status (*tile)(const Tensor& in, Tensor* out, int threads) = nullptr;
  Status (*range)(const Tensor& start, const Tensor& delta, Tensor* out, int threads) = nullptr;
};

}  // namespace whittle
