// Packed 4-bit integers as ONNX stores them (opset 21 int4/uint4; com.microsoft MatMulNBits):
// two values a byte, the element with the lower index in the low nibble. The helpers read and
// write one element; kernels that stream many decode whole bytes themselves.
#pragma once

#include <cstdint>

#include "kernels/common/hd.h"

namespace whittle {
namespace int4 {

// Element i of a packed uint4 array (0..15).
WH_HD_INLINE int UInt4At(const uint8_t* p, int64_t i) { return (p[i >> 1] >> ((i & 1) * 4)) & 0xF; }
// Element i of a packed int4 array (-8..7).
WH_HD_INLINE int Int4At(const uint8_t* p, int64_t i) {
  const int u = UInt4At(p, i);
  return u >= 8 ? u - 16 : u;
}
// Writes the low 4 bits of v as element i (the other nibble is kept).
WH_HD_INLINE void Set4(uint8_t* p, int64_t i, int v) {
  const int shift = static_cast<int>(i & 1) * 4;
  p[i >> 1] = static_cast<uint8_t>((p[i >> 1] & ~(0xF << shift)) | ((v & 0xF) << shift));
}

}  // namespace int4
}  // namespace whittle
