// Blocked 4-bit weights as ONNX opset 21 writes them, DequantizeLinear(int4|uint4 W [K, N], scale
// [ceil(K/B), N], zero point, axis 0, block_size B) -> MatMul(A, .), run as one com.microsoft
// MatMulNBits node whose kernel reads the 4-bit codes in place (kernels/cpu/nbits.cc): the float
// W never exists. BlockedToNBits is the layout change (W transposed to [N, K] codes, packed
// low-first; int4 codes shifted by 8 to uint4), shared with compress-model's format=matmulnbits.
#pragma once

#include <cstdint>

#include "kernels/common/nbits.h"
#include "lib/ir/graph.h"
#include "lib/ir/status.h"

namespace whittle {

struct NBitsTensors {
  NBitsAttrs attrs;
  Tensor b;            // uint8 [N, blocks, blob]
  Tensor scales;       // float32 [N, blocks]
  Tensor zero_points;  // uint8 [N, ceil(blocks / 2)]; undefined when every zero point is 8
};

// w int4|uint4 [K, N], scale float32 [ceil(K/block), N], zp (null, or w's type and scale's shape).
// block: a power of two >= 16.
StatusOr<NBitsTensors> BlockedToNBits(const Tensor& w, const Tensor& scale, const Tensor* zp, int64_t block);

// Rewrites every matching DequantizeLinear -> MatMul (the MatMul reading the dequantized weight
// as input 1). Adds the "com.microsoft" opset import when it introduces the op. Dequantize nodes
// nobody reads any more are left for Graph::Compact().
Status FuseNBits(Graph& g, int* count);

}  // namespace whittle
