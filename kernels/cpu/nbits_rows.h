// The per-ISA inner loops of the CPU MatMulNBits kernel (kernels/cpu/nbits.cc), 4-bit codes read
// in place. A row of A is first laid out "deinterleaved" for lane count L: per group of 2L
// elements, the L even-indexed ones then the L odd-indexed ones, zero-padded to whole blocks.
// Then L bytes of codes widen to L lanes whose low nibbles pair with the first half and high
// nibbles with the second: no shuffle in the inner loop. AVX-512 uses L = 16, AVX2 L = 8.
#pragma once

#include <cstdint>

namespace whittle::cpu {

// out[r] = sum_j scales[r * nb + j] * sum_{k in block j} a[k] * code(r, k), r in [0, rows):
// row r's codes at b + r * row_bytes, nb blocks of `block` codes (block a multiple of 2L).
using NBitsRowsFn = void (*)(const float* a_perm, const uint8_t* b, int64_t row_bytes, const float* scales, int64_t nb,
                             int64_t block, int64_t rows, float* out);

namespace nbits_avx512 {
constexpr int kLanes = 16;
void DotRows4(const float* a_perm, const uint8_t* b, int64_t row_bytes, const float* scales, int64_t nb,
              int64_t block, int64_t rows, float* out);
}  // namespace nbits_avx512

namespace nbits_avx2 {
constexpr int kLanes = 8;
void DotRows4(const float* a_perm, const uint8_t* b, int64_t row_bytes, const float* scales, int64_t nb,
              int64_t block, int64_t rows, float* out);
}  // namespace nbits_avx2

}  // namespace whittle::cpu
