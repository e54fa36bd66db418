// ONNX Runtime's contrib ops that its transformer optimizer writes, read as what they compute in
// standard ONNX: each node is replaced at load by its definition in ai.onnx ops (as an ONNX
// function body would be), so the runtime's fusions, every pass and every other runtime see
// standard ops, and a model Whittle saves again is standard ONNX. Semantics as ONNX Runtime 1.32's
// CPU kernels compute them (tests/corpus/ort_tools/README.md, measured there):
//   com.microsoft SkipLayerNormalization(input, skip, gamma[, beta][, bias]) -> y[, mean, inv_std, sum]
//   com.microsoft SkipSimplifiedLayerNormalization(input, skip, gamma[, bias]) -> y[, mean, inv_std, sum]
//   SimplifiedLayerNormalization (domain "", ORT's RMSNorm; axis -1) (X, scale) -> Y[, inv_std]
//   com.microsoft Gelu(X), BiasGelu(A, B) (erf form), FastGelu(X[, bias]) (tanh form),
//     QuickGelu(X; alpha=1.702), BiasAdd(X, bias, skip), BiasSplitGelu(X, bias),
//   com.microsoft FusedMatMul(A, B; alpha, transA, transB) where the transposed operand's rank is
//     known (transBatchA/B are refused).
//   com.microsoft EmbedLayerNormalization(ids, [segment_ids], word, position, [segment], gamma, beta,
//     [mask], [position_ids]) -> output, mask_index (count of ones), [embedding_sum]
//   com.microsoft FusedGemm (Gemm then Relu/Tanh/Sigmoid/LeakyRelu/HardSigmoid)
//   com.microsoft Attention without past, not unidirectional: a 1-D key-length mask from
//     EmbedLayerNormalization or a 2-D [batch, keys] one (added, mask_filter_value where masked);
//     with V as wide as Q/K in the packed-qkv form the runtime's fuse_attention knows.
//   com.microsoft DynamicQuantizeMatMul(A, B, b_scale[, b_zp][, bias]) and
//     MatMulIntegerToFloat(A, B, a_scale, b_scale[, a_zp][, b_zp][, bias]): DynamicQuantizeLinear
//     (for the first), MatMulInteger, Cast, Mul by a_scale·b_scale, Add bias.
// A node that cannot be expanded (float16/bfloat16/double, an attribute or mask form not covered)
// is an error naming the node and why.
#pragma once

#include "lib/ir/graph.h"
#include "lib/ir/status.h"

namespace whittle {

// Replaces every node above by standard ops (in place, node order kept topological). *count, when
// given, gets the number of nodes expanded.
Status ExpandContribOps(Graph& g, int* count = nullptr);

}  // namespace whittle
