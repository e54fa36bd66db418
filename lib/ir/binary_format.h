// Binarized layers (ai.whittle BinaryMatMul, BinaryConv; lib/ops/binary.cc). Bit layout:
// a weight matrix W [N, K] (N outputs, K contracted inputs) is stored as uint64 [N, words] with
// words = ceil(K / 64): bit (k % 64) of word (k / 64) of row n is 1 when W[n, k] >= 0 (the sign
// +1, sign(0) = +1) and 0 when W[n, k] < 0 (-1); bits past K in the last word are 0. For
// BinaryConv, row m is output channel m and k runs over the group's C/group input channels and
// the kernel taps, k = (c * kh + ky) * kw + kx (the order of a Conv weight [M, C/group, kh, kw]).
// The layer's weight is sign(W[n, k]) * alpha[n]. activations=float: Y = A (sign W * alpha)^T +
// bias. activations=binary (XNOR-Net): A's rows are binarized the same way with a scale beta =
// mean |A| over the row (BinaryMatMul) or over the whole sample C x H x W (BinaryConv), and
// Y = beta * alpha[n] * (K - 2 popcount(a_bits XOR w_bits)) + bias[n]; a Conv tap in the zero
// padding contributes 0 (as the float Conv of sign(x) * beta would). With the runtime-internal
// "_activation" = "Relu" (runtime/rewrite/fuse_activations.cc) every kernel gives max(Y, 0).
#pragma once

#include <cstdint>
#include <string>

#include "lib/ir/status.h"
#include "lib/ir/tensor.h"

namespace whittle {

inline int64_t BinaryWords(int64_t k) { return (k + 63) / 64; }

struct BinaryAttrs {
  int64_t n = 0;        // out_features (BinaryConv: output channels M)
  int64_t k = 0;        // contracted inputs (BinaryConv: C/group * kh * kw)
  bool binary = false;  // activations=binary
  bool relu = false;    // Relu fused by the runtime ("_activation" = "Relu"; never in a saved model)
};

// "float" -> false, "binary" -> true; anything else an error naming the value.
StatusOr<bool> ParseBinaryActivations(const std::string& s);

// bits: uint64 [a.n, BinaryWords(a.k)] with zero padding bits; alpha float32 [a.n]; bias null or
// float32 [a.n]. With scan_padding, also reads every row's last word (a constant's check at load).
Status CheckBinaryTensors(const BinaryAttrs& a, const Tensor& bits, const Tensor& alpha, const Tensor* bias,
                          bool scan_padding);

// Packs k floats into BinaryWords(k) words (bit = x >= 0; padding bits zero); returns sum |x|.
double PackSigns(const float* x, int64_t k, uint64_t* out);

inline bool BinaryBit(const uint64_t* row, int64_t k) { return (row[k >> 6] >> (k & 63)) & 1u; }

}  // namespace whittle
