// Block-wise 4- or 8-bit weight quantization of one matrix W [n, k] (n outputs, k inputs; blocks
// of `block` inputs per output row), by round-to-nearest or by GPTQ (Frantar, Ashkboos, Hoefler,
// Alistarh, "GPTQ: Accurate Post-Training Quantization for Generative Pre-trained Transformers",
// ICLR 2023, arXiv:2210.17323). GPTQ quantizes the input columns in order and spreads each
// column's rounding error over the columns not yet quantized through the inverse Hessian
// H = X^T X of the layer's calibration inputs (its Cholesky factor, with 1% dampening), with the
// paper's lazy batches of 128 columns; a block's scale and zero point are chosen from its
// columns as they stand when the block starts (the paper's "groupsize"), so both forms of output
// (DequantizeLinear block_size, MatMulNBits) represent the result exactly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace whittle::quant {

struct IntBlocks {
  int64_t n = 0, k = 0, block = 32;
  bool symmetric = false;
  int bits = 4;  // 4 or 8
  // codes[r * k + c]: 0..2^bits-1 (asymmetric: with the zero point; symmetric: q + 2^(bits-1),
  // q in -8..7 or -128..127).
  std::vector<uint8_t> codes;
  std::vector<float> scale;       // [n][blocks]
  std::vector<uint8_t> zero;      // [n][blocks] 0..2^bits-1 (symmetric: 2^(bits-1))
  int64_t blocks() const { return (k + block - 1) / block; }
  int qmax() const { return (1 << bits) - 1; }
  float Dequant(int64_t r, int64_t c) const {
    const int64_t j = r * blocks() + c / block;
    return (static_cast<float>(codes[static_cast<size_t>(r * k + c)]) - zero[static_cast<size_t>(j)]) * scale[static_cast<size_t>(j)];
  }
};
using Int4Blocks = IntBlocks;

// One block's scale and zero point from its values v[i * stride], i < count: the range [min, max]
// (always holding 0) times `clip` (AWQ's clipping search passes < 1; codes saturate beyond it);
// symmetric: the largest magnitude over 2^(bits-1)-1, zero point 2^(bits-1).
void BlockParams(const float* v, int64_t count, int64_t stride, bool symmetric, int bits, float clip, float* scale,
                 uint8_t* zero);
// The code of w in a block with these parameters, saturated to 0..2^bits-1.
uint8_t Code(float w, float scale, uint8_t zero, int bits);

// Round to nearest, each block's parameters from its min and max (symmetric: its largest
// magnitude, codes -8..7 around 8 for 4 bits, -127..127 around 128 for 8).
IntBlocks QuantizeRtn(const float* w, int64_t n, int64_t k, int64_t block, bool symmetric, int bits = 4);

// GPTQ with the Gram matrix of the layer's inputs (k x k, row-major, any positive scale; the
// entries of features never seen, a zero diagonal, are handled as the paper does). Fails (empty
// result) only when the dampened Hessian is not positive definite.
bool QuantizeGptq(const float* w, int64_t n, int64_t k, int64_t block, bool symmetric, const std::vector<double>& gram,
                  IntBlocks* out, int bits = 4, double dampening = 0.01);

}  // namespace whittle::quant
