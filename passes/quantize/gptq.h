// Block-wise 4-bit weight quantization of one matrix W [n, k] (n outputs, k inputs; blocks of
// `block` inputs per output row), by round-to-nearest or by GPTQ (Frantar, Ashkboos, Hoefler,
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

struct Int4Blocks {
  int64_t n = 0, k = 0, block = 32;
  bool symmetric = false;
  // codes[r * k + c]: 0..15 (asymmetric: with the zero point; symmetric: q + 8, q in -8..7).
  std::vector<uint8_t> codes;
  std::vector<float> scale;       // [n][blocks]
  std::vector<uint8_t> zero;      // [n][blocks] 0..15 (symmetric: 8)
  int64_t blocks() const { return (k + block - 1) / block; }
  float Dequant(int64_t r, int64_t c) const {
    const int64_t j = r * blocks() + c / block;
    return (static_cast<float>(codes[static_cast<size_t>(r * k + c)]) - zero[static_cast<size_t>(j)]) * scale[static_cast<size_t>(j)];
  }
};

// Round to nearest, each block's parameters from its min and max (symmetric: its largest
// magnitude, codes -8..7 around 8).
Int4Blocks QuantizeRtn(const float* w, int64_t n, int64_t k, int64_t block, bool symmetric);

// GPTQ with the Gram matrix of the layer's inputs (k x k, row-major, any positive scale; the
// entries of features never seen, a zero diagonal, are handled as the paper does). Fails (empty
// result) only when the dampened Hessian is not positive definite.
bool QuantizeGptq(const float* w, int64_t n, int64_t k, int64_t block, bool symmetric, const std::vector<double>& gram,
                  Int4Blocks* out, double dampening = 0.01);

}  // namespace whittle::quant
