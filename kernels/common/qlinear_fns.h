// The contract between the integer linear ops' glue (kernels/qlinear_kernels.cc) and its
// backends: the per-call GEMM / conv descriptions and QLinearFns, one instance per backend
// (reference::kQLinearFns in kernels/reference/qlinear.h, cpu::kQLinearFns in
// kernels/cpu/qlinear.h). The numeric contract is written in kernels/reference/qlinear.h.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/common/quant_params.h"
#include "lib/ir/status.h"
#include "lib/ir/tensor.h"
#include "lib/ir/window.h"

namespace whittle {

// The family's compute functions per backend (kernels/kernel.h BackendTable). A backend may pack
// constant weights once at load; what it packs is its own business (type-erased here).
using QPackedWeights = std::shared_ptr<const void>;

// y[rows, N] = epilogue(a[rows, K] * b[K, N]) with a's zero point per row (1 or rows values) and
// b's per column (1 or N). packed_b: the backend's packed b when b is the kernel's constant
// weight, else null.
struct QGemmCall {
  QMatrix a, b;
  int64_t rows = 0, N = 0, K = 0;
  const QOutput* out = nullptr;
  const void* packed_b = nullptr;
  void* y = nullptr;
};
// y [N, M, out...] = epilogue(conv(x - x_zp, w - w_zp)) for the geometry of shape; packed_w: the
// backend's packed w when w is the kernel's constant weight, else null.
struct QConvCall {
  const ConvShape* shape = nullptr;
  const Tensor* x = nullptr;
  const Tensor* w = nullptr;
  int32_t x_zp = 0;
  const std::vector<int32_t>* w_zp = nullptr;
  const QOutput* out = nullptr;
  const void* packed_w = nullptr;
  Tensor* y = nullptr;
  // A max pool fused after the conv (QConv's _max_pool: window = stride per spatial dim, no
  // padding, floor mode): y holds the pooled output. Set only where conv_pools said yes.
  const std::vector<int64_t>* max_pool = nullptr;
};
struct QLinearFns {
  // Null: the backend computes from the unpacked weights.
  QPackedWeights (*pack_gemm_weights)(const Tensor& w, const std::vector<int32_t>& w_zp) = nullptr;
  Status (*gemm)(const QGemmCall& c, int threads) = nullptr;
  QPackedWeights (*pack_conv_weights)(const Tensor& w, const std::vector<int32_t>& w_zp, int64_t group) = nullptr;
  Status (*conv)(const QConvCall& c, int threads) = nullptr;
  // x float32; y uint8 (x's dims), y_scale float32 and y_zero_point uint8 scalars (may be null).
  Status (*dynamic_quantize)(const Tensor& x, Tensor* y, Tensor* y_scale, Tensor* y_zero_point, int threads) = nullptr;
  // Whether conv computes call c (max_pool not yet set) with its max pool fused. Null or false:
  // the kernel runs the conv into a scratch tensor and pools that.
  bool (*conv_pools)(const QConvCall& c) = nullptr;
};

}  // namespace whittle
