// Fuses multi-head self-attention as exporters write it for a packed qkv projection (timm's ViT
// Attention, the bundled patch transformer; PyTorch's TorchScript exporter):
//   r = Reshape(x [B, N, 3*H*d]) -> [B, N, 3, H, d];  t = Transpose(r, perm=[2, 0, 3, 1, 4])
//   q, k, v = Squeeze(Split(t, axis=0, 3 x 1), axis 0)            each [B, H, N, d]
//   p = Softmax([Add(., mask)] Mul(MatMul(q, Transpose(k, [0, 1, 3, 2])), s), axis=-1)
//                                   (or Div by 1/s, or no scale; the mask broadcasting to [B, H, N, N])
//   y = Reshape(Transpose(MatMul(p, v), [0, 2, 1, 3])) -> [B, N, H*d]
// into one ai.whittle Attention(x) node (lib/ops/attention.cc) whose kernel reads Q, K and V in
// place and writes y in place: the three transposes, the split and the two reshapes disappear.
// s is a scalar constant after folding (the scale attribute), or a one-element float computed at
// run time for a Mul (the node's second input; PyTorch writes Pow(Cast(head_dim), -0.5)). Every
// intermediate must be read only inside the pattern.
#pragma once

#include "lib/ir/graph.h"
#include "lib/ir/status.h"

namespace whittle {

Status FuseAttention(Graph& g, int* count);

}  // namespace whittle
