// The runtime's own graph rewrites, applied by Session::Load before planning: QDQ fusion
// (fuse_qdq.h), constant folding (fold_constants.h), Conv+BatchNormalization folding
// (fold_conv_bn.h), zero Pads and per-channel Mul/Add into the Conv (fold_into_conv.h), GELU
// fusion (fuse_gelu.h), residual Adds into the Conv before them (fuse_conv_add.h) and fusing a single consumer activation into Conv/Gemm/MatMul
// (fuse_activations.h). Each rule matches first, then applies, and leaves the graph alone when a
// precondition fails (non-constant weights, several consumers, a graph output in the middle).
#pragma once

#include <optional>

#include "lib/ir/graph.h"
#include "lib/ir/status.h"

namespace whittle {

struct RewriteReport {
  int skipped_identities = 0;  // Identity nodes whose readers now read their input
  int folded_constants = 0;
  int folded_batchnorms = 0;
  int folded_into_conv = 0;   // zero Pads, and constant Mul/Add per channel, computed by the Conv
  int cropped_conv_taps = 0;  // Convs whose kernel taps that only ever read padding were cut
  int fused_activations = 0;
  int fused_gelu = 0;         // GELU subgraphs (erf or tanh form) run as one Gelu node
  int fused_layernorm = 0;    // layer and RMS norms written out (ReduceMean/Sub/Pow/Sqrt/Div) as one node
  int fused_conv_add = 0;     // residual Adds computed inside the Conv before them
  int fused_matmul_bias = 0;  // bias Adds after a MatMul computed in its epilogue
  int fused_cache_attention = 0;  // ai.onnx Attention given back the key/value cache concatenated outside it
  int fused_attention = 0;    // packed-qkv self-attention subgraphs run as one Attention node
  int fused_qdq = 0;          // Conv/Gemm/MatMul running as int8 QConv/QGemm
  int fused_nbits = 0;        // DequantizeLinear(int4 blocked) -> MatMul running as MatMulNBits
  int int8_passthrough = 0;   // MaxPool/Flatten/Reshape moved onto int8 data
  int fused_qconv_pool = 0;   // MaxPools computed inside the int8 conv before them
  int fused_lookup_tables = 0;  // float math on dequantized bytes run as 256-entry tables
  int nchwc_nodes = 0;        // Conv/pool/Relu/Add nodes run on the blocked channel layout
};

// QDQ fusion first (and the int8 conv + MaxPool fusion), then constant folding, (given
// cpu_fusions) element-wise math on dequantized bytes as tables (fuse_lookup.h), Conv+BatchNormalization
// folding, GELU, LayerNorm and (given cpu_fusions) RMSNorm fusion, Conv+Add and MatMul+bias fusion, attention fusion, (given
// cpu_fusions) the decoders' attention with its KV cache (fuse_cache_attention.h) and activation
// fusion, then (given nchwc_block: the backend runs that blocked layout, kernels/nchwc.h) the NCHWc
// conversion, then Compact(), Verify() and InferShapes(). cpu_fusions: the fused ops only the CPU
// backends run (a device session keeps the nodes it has kernels for, instead of a CPU fallback).
StatusOr<RewriteReport> RewriteForRuntime(Graph& g, std::optional<int> nchwc_block = std::nullopt,
                                          bool cpu_fusions = false);

}  // namespace whittle
