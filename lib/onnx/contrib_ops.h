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
//   com.microsoft Attention: a mask_index of key lengths ([B], or [2B] ends then starts; from
//     EmbedLayerNormalization or declared 1-D) or a 2-D [batch, keys] mask (added,
//     mask_filter_value where masked); unidirectional=1 (later keys get the lowest float); past
//     [2, B, N, P, h] and present; without past, causality or present and with V as wide as Q/K, in
//     the packed-qkv form the runtime's fuse_attention knows. do_rotary and a shared past/present
//     buffer are refused.
//   ONNX Runtime's quantized ops (lib/onnx/contrib_quant_ops.cc; semantics and exactness measured in
//     tests/corpus/ort_quant/README.md): DynamicQuantizeMatMul, MatMulIntegerToFloat (MatMulInteger,
//     Cast, Mul by a_scale·b_scale, Add bias), QGemm, QLinearAdd/Mul/Sigmoid/LeakyRelu/Concat/
//     AveragePool/GlobalAveragePool/Softmax (integer or Dequantize/op/Quantize chains in the
//     kernels' arithmetic order), QAttention (the integer projection, then Attention),
//     QEmbedLayerNormalization (its tables dequantized), DynamicQuantizeLSTM (X·W once, then a Scan
//     over time whose body requantizes h each step; no sequence_lens, default activations).
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
