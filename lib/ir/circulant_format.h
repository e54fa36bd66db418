// Block-circulant weights (ai.whittle BlockCirculantMatMul, CirCNN): a weight W [N, K] (output n,
// input k; Y[..., n] = sum_k A[..., k] W[n, k] + bias[n]) is a P x Q grid of B x B blocks,
// P = ceil(N / B), Q = ceil(K / B), W zero-padded to [P*B, Q*B]. Block (p, q) is circulant and
// stored as one vector c = blocks[p, q, 0..B): the convention, used by the fit, the kernels and
// the lowering alike, is
//     W[p*B + i, q*B + j] = c[(i - j) mod B]      (i, j in [0, B))
// so block (p, q) times x_q is the circular convolution c * x_q (DFT: C[f] X[f]).
#pragma once

#include <cstdint>

#include "lib/ir/attribute.h"
#include "lib/ir/status.h"
#include "lib/ir/tensor.h"

namespace whittle {

struct CirculantAttrs {
  int64_t block = 0;  // B
  int64_t n = 0;      // out_features (rows of W)
  int64_t k = 0;      // in_features (columns of W)
  int64_t p() const { return (n + block - 1) / block; }
  int64_t q() const { return (k + block - 1) / block; }
};

// The node's attributes block, out_features and in_features (0 where absent; unchecked).
inline CirculantAttrs CirculantAttrsOf(const AttributeMap& at) {
  return CirculantAttrs{at.GetInt("block", 0), at.GetInt("out_features", 0), at.GetInt("in_features", 0)};
}

// The attributes (block >= 1, features >= 1, the grid small enough to index without overflow),
// the blocks (float32 [P, Q, B]) and the bias (float32 [N], optional): the check every kernel
// runs at load, so a hostile file can never make one read past a tensor.
Status CheckCirculantAttrs(const CirculantAttrs& a);
Status CheckCirculantTensors(const CirculantAttrs& a, const Tensor& blocks, const Tensor* bias);

// The inputs of ai.whittle BlockCirculantMatMulGradWeight(dY, A): float32 A [..., K] and dY
// [..., N] with the same leading dims.
Status CheckCirculantGradWeightShapes(const CirculantAttrs& a, const Tensor& dy, const Tensor& x);

// The dense weight the blocks stand for, [N, K] row-major (padding dropped).
void ExpandCirculant(const CirculantAttrs& a, const float* blocks, float* w);

// The least-squares block-circulant fit of w [N, K] row-major: each c[d] is the mean of the
// entries of its block on the wrapped diagonal (i - j) mod B = d that lie inside W (padding rows
// and columns never touch a real input or output, so they do not constrain the fit); 0 where the
// diagonal has none. blocks: [P, Q, B].
void FitCirculant(const CirculantAttrs& a, const float* w, float* blocks);

// Real multiply-adds per row of A in the FFT form (kernels/cpu/circulant.cc): the bins' products
// exactly (P*Q per real bin — 0 and, B even, B/2 — and 4*P*Q per complex bin), plus an estimate
// of B*ceil(log2 B) per real FFT of length B (Q forward, P inverse).
int64_t CirculantMacsPerRow(const CirculantAttrs& a);

}  // namespace whittle
