// com.microsoft MatMulNBits (lib/ops/nbits.cc) for every backend: its attributes, its operands
// checked once (CheckNBitsOperands), the zero point of a block, and the family's contract
// (NBitsFns: one builder per backend; kernels/nbits_kernels.cc picks it). Codes are packed
// low-first along K, so row n's code k is nibble k of row n's bytes (bits 4) or byte k (bits 8).
#pragma once

#include <cstdint>
#include <string>

#include "kernels/common/int4.h"
#include "kernels/kernel.h"
#include "lib/ir/status.h"
#include "lib/ir/tensor.h"

namespace whittle {

struct NBitsAttrs {
  int64_t K = 0, N = 0, bits = 4, block = 32;
  // 4: the activations may be quantized to int8 per block (ONNX Runtime's meaning: the lowest
  // accuracy the node accepts); 0 (unset) to 3: float arithmetic. A hint a backend may ignore.
  int64_t accuracy_level = 0;
  int64_t blocks() const { return (K + block - 1) / block; }          // per row of B
  int64_t blob() const { return block * bits / 8; }                   // bytes per block
  int64_t row_bytes() const { return blocks() * blob(); }             // bytes per row of B
  int64_t zp_row_bytes() const { return (blocks() * bits + 7) / 8; }  // packed zero points per row
};

NBitsAttrs NBitsAttrsOf(const AttributeMap& attrs);

// The weight operands, checked against the attributes (types, element counts); views, not owned.
struct NBitsWeights {
  const uint8_t* b = nullptr;         // [N][row_bytes]
  const float* scales = nullptr;      // [N][blocks]
  const uint8_t* zp_packed = nullptr; // [N][zp_row_bytes], or null
  const float* zp_float = nullptr;    // [N][blocks], or null
  const float* bias = nullptr;        // [N], or null

  // Zero point of row n's block j (2^(bits-1) when the model gives none).
  float ZeroPoint(const NBitsAttrs& a, int64_t n, int64_t j) const {
    if (zp_float) return zp_float[n * a.blocks() + j];
    if (zp_packed) {
      const uint8_t* row = zp_packed + n * a.zp_row_bytes();
      return static_cast<float>(a.bits == 4 ? int4::UInt4At(row, j) : row[j]);
    }
    return static_cast<float>(1 << (a.bits - 1));
  }
  int Code(const NBitsAttrs& a, int64_t n, int64_t k) const {
    const uint8_t* row = b + n * a.row_bytes();
    return a.bits == 4 ? int4::UInt4At(row, k) : row[k];
  }
};

// b, scales, zero_points (may be null), g_idx (must be null), bias (may be null).
StatusOr<NBitsWeights> CheckNBitsOperands(const NBitsAttrs& a, const Tensor& b, const Tensor& scales,
                                          const Tensor* zero_points, const Tensor* g_idx, const Tensor* bias);

// make: the kernel for one node whose weight operands (inputs 1..5) are constants, already
// checked; a backend returns null where it has no fast path (then the reference kernel runs).
struct NBitsFns {
  KernelOr (*make)(const NBitsAttrs& a, const KernelInit& init) = nullptr;
};

}  // namespace whittle
