// The per-ISA inner loops of the CPU MatMulNBits kernel (kernels/cpu/nbits.cc), 4-bit codes read
// in place. Each row of A is first laid out "deinterleaved" for lane count L: per group of 2L
// elements, the L even-indexed ones then the L odd-indexed ones, zero-padded to whole blocks.
// Then L bytes of codes widen to L lanes whose low nibbles pair with the first half and high
// nibbles with the second: no shuffle in the inner loop. AVX-512 uses L = 16 (a nibble becomes a
// float by one vpermps from a 16-entry table), AVX2 L = 8 (mask and convert).
#pragma once

#include <cstdint>

namespace whittle::cpu {

// The weight side of one call: `rows` rows of codes from b (row stride row_bytes; nb blocks of
// `block` codes), their scales [rows][nb] and zero points: zp8 [rows][nb] (one byte each) or zf
// [rows][nb] (float), else zdefault for every block.
struct NBitsWeightRows {
  const uint8_t* b;
  int64_t row_bytes;
  const float* scales;
  const uint8_t* zp8;
  const float* zf;
  float zdefault;
  int64_t nb, block, rows;
};

// The operands of one call: mr (1..4) rows of A laid out as above (row stride lda) with their
// per-block sums asum [mr][nb], and the weight rows (block a multiple of 2L).
struct NBitsRowsArgs : NBitsWeightRows {
  const float* a_perm;
  int64_t lda;
  int mr;
  const float* asum;
};

// out[m * ldo + r] = sum_j scales[r, j] * (sum_{k in block j} a[m, k] * code(r, k) - zp[r, j] * asum[m, j])
// for m < mr and r < rows. Each code is read once for all mr rows of A.
using NBitsRowsFn = void (*)(const NBitsRowsArgs& x, float* out, int64_t ldo);

// The int8 form (accuracy_level 4: the activations quantized to int8 per block, Whittle's and
// ONNX Runtime's meaning of that level): mr (1..4) rows of A as int8 qa [mr][chunks][128] (row
// stride lda), chunk c holding the activations of code bytes 64c..64c+63: the 64 low-nibble
// (even k) ones, then the 64 high-nibble (odd k) ones; sa_lanes [mr][chunks][16] (row stride ldsa)
// the activation scale of each lane's block (lane l: code bytes 4l..4l+3), 0 past the row;
// asum [mr][nb] = scale * (sum of the block's int8 activations). Codes, scales and zero points as
// in NBitsRowsArgs; block (a power of two >= 16) need not divide 128.
struct NBitsQ8Args : NBitsWeightRows {
  const int8_t* qa;
  int64_t lda;
  const float* sa_lanes;
  int64_t ldsa;
  int mr;
  const float* asum;
};

// out[m * ldo + r] = sum_j scales[r, j] * sa[m, j] * (sum_{k in block j} qa[m, k] * code(r, k) - zp[r, j] * sumq[m, j])
namespace nbits_avx512vnni {
void DotRowsQ8(const NBitsQ8Args& x, float* out, int64_t ldo);
}  // namespace nbits_avx512vnni

namespace nbits_avx512 {
constexpr int kLanes = 16;
void DotRows(const NBitsRowsArgs& x, float* out, int64_t ldo);
}  // namespace nbits_avx512

namespace nbits_avx2 {
constexpr int kLanes = 8;
void DotRows(const NBitsRowsArgs& x, float* out, int64_t ldo);
}  // namespace nbits_avx2

}  // namespace whittle::cpu
