// Activation-aware weight quantization (AWQ: Lin, Tang, Tang, Yang, Chen, Wang, Xiao, Dang, Gan,
// Han, "AWQ: Activation-aware Weight Quantization for LLM Compression and Acceleration", MLSys
// 2024, arXiv:2306.00978) of one matrix W [n, k]: the weights of input channels with large
// activations matter most, so each input channel c is scaled by s_c = m_c^alpha before block
// rounding (m_c the channel's activation magnitude, alpha searched on a grid) and the layer's
// input is divided by s_c, the paper's per-channel scaling; then, optionally, each block's range
// is shrunk where that lowers the block's output error (the paper's weight clipping search).
#pragma once

#include <cstdint>
#include <vector>

#include "passes/quantize/gptq.h"

namespace whittle::quant {

struct AwqResult {
  IntBlocks q;                      // the blocks of W diag(s)
  std::vector<float> inv_scale;     // [k]: 1/s, what the layer's input is multiplied by
  float alpha = 0;                  // the chosen exponent (0: s = 1, plain rounding)
  double error = 0, rtn_error = 0;  // output error tr(dW G dW^T) of the result and of plain rounding
  int64_t clipped = 0;              // blocks whose range the clipping search shrank
};

// gram: the k x k Gram matrix X^T X of the layer's calibration inputs (any positive scale). The
// output error of a weight change dW on those inputs is tr(dW G dW^T), so X itself is not needed;
// the activation magnitude m_c is the root mean square sqrt(G_cc) (the paper's mean |x_c| is not
// in the Gram; the alpha search absorbs the difference in spread). grid: alphas i / grid,
// i < grid, as the paper's. The search measures the error on an even subset of output rows when
// n k^2 is large. Fails (false) only when no input channel was ever nonzero.
bool QuantizeAwq(const float* w, int64_t n, int64_t k, int64_t block, bool symmetric, int bits,
                 const std::vector<double>& gram, bool clip, AwqResult* out, int grid = 20);

}  // namespace whittle::quant
