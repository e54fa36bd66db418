// Weight sharing (ai.whittle CodebookMatMul): a weight matrix W [N, K] (output n, input k) stored
// as a float codebook of at most 2^bits entries and one packed index per weight, row-major in
// (n, k): bits = 8 one byte per index; bits = 4 two per byte, element e in the low nibble of byte
// e / 2 when e is even, the high nibble when odd. Y[..., n] = sum_k A[..., k] W[n, k] + bias[n].
#pragma once

#include <cstdint>

#include "lib/ir/attribute.h"
#include "lib/ir/status.h"
#include "lib/ir/tensor.h"

namespace whittle {

struct CodebookAttrs {
  int64_t bits = 8;  // 4 or 8
  int64_t n = 0;     // output features (rows of W)
  int64_t k = 0;     // input features (columns of W)
};

// The node's attributes bits (8 where absent), out_features and in_features (unchecked).
inline CodebookAttrs CodebookAttrsOf(const AttributeMap& at) {
  return CodebookAttrs{at.GetInt("bits", 8), at.GetInt("out_features", 0), at.GetInt("in_features", 0)};
}

inline int64_t PackedIndexBytes(int64_t count, int64_t bits) { return (count * bits + 7) / 8; }

inline uint32_t CodebookIndexAt(const uint8_t* packed, int64_t e, int64_t bits) {
  return bits == 8 ? packed[e] : (packed[e >> 1] >> ((e & 1) * 4)) & 15u;
}

// The codebook (float32 [C], 1 <= C <= 2^bits), indices (uint8 [PackedIndexBytes(n*k, bits)])
// and bias (float32 [n], optional) against attrs; with scan_indices, also every index < C (a
// constant's check at load: a hostile file can never make a kernel read past the codebook).
Status CheckCodebookTensors(const CodebookAttrs& a, const Tensor& codebook, const Tensor& indices, const Tensor* bias,
                            bool scan_indices);

}  // namespace whittle
