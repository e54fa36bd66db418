#include "runtime/rewrite/rewrite.h"

#include <map>
#include <set>

#include "lib/ops/op_def.h"
#include "runtime/rewrite/fold_constants.h"
#include "runtime/rewrite/fold_conv_bn.h"
#include "runtime/rewrite/fold_into_conv.h"
#include "runtime/rewrite/fuse_activations.h"
#include "runtime/rewrite/fuse_attention.h"
#include "runtime/rewrite/fuse_cache_attention.h"
#include "runtime/rewrite/fuse_conv_add.h"
#include "runtime/rewrite/fuse_gelu.h"
#include "runtime/rewrite/fuse_layernorm.h"
#include "runtime/rewrite/fuse_lookup.h"
#include "runtime/rewrite/fuse_matmul_bias.h"
#include "runtime/rewrite/fuse_nbits.h"
#include "runtime/rewrite/fuse_qconv_pool.h"
#include "runtime/rewrite/fuse_qdq.h"
#include "runtime/rewrite/match.h"
#include "runtime/rewrite/nchwc.h"

namespace whittle {
namespace {

// Identity nodes whose output is not a graph output are skipped: their readers read the input
// (Paddle2ONNX writes one after many BatchNormalizations and Clips, where a cast was a no-op,
// and each would split a Conv from its activation). So are Casts to the type their input already
// has (torch.onnx puts two float-to-float Casts around every RMSNorm of a Llama export: 88 nodes
// per decode step of a 22-layer model), and a Concat of one input (torch.onnx's cache of the
// first layer).
int SkipIdentities(Graph& g) {
  std::map<int, int> source;  // an Identity's output -> its input
  std::set<int> dead;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    if (n.inputs.size() != 1 || n.outputs.size() != 1 || n.inputs[0] < 0) continue;
    // A Concat of one input is its input (torch.onnx writes one per layer's first cache).
    const bool identity = rewrite::IsOp(n, "Identity") || rewrite::IsOp(n, "Concat");
    const DType from = g.value(n.inputs[0]).dtype;
    const bool same_cast = rewrite::IsOp(n, "Cast") && from != DType::kUndefined &&
                           n.attrs.GetInt("to", -1) == static_cast<int64_t>(from) && !n.attrs.Has("saturate") &&
                           !n.attrs.Has("round_mode");
    if (!identity && !same_cast) continue;
    const int x = n.inputs[0], y = n.outputs[0];
    if (x < 0 || y < 0 || g.IsGraphOutput(y)) continue;
    source[y] = x;
    dead.insert(static_cast<int>(i));
  }
  if (dead.empty()) return 0;
  // One pass over the readers; a chain of Identities resolves to its first input.
  for (Node& m : g.nodes()) {
    for (int& v : m.inputs) {
      for (auto it = source.find(v); it != source.end(); it = source.find(v)) v = it->second;
    }
  }
  g.RemoveNodes(dead);
  return static_cast<int>(dead.size());
}

}  // namespace

StatusOr<RewriteReport> RewriteForRuntime(Graph& g, std::optional<int> nchwc_block, bool cpu_fusions) {
  RewriteReport r;
  r.skipped_identities = SkipIdentities(g);
  // Before folding: FoldConstants would turn DequantizeLinear(int8 or int4 weight) into a float
  // weight and the int8 and int4 patterns would be lost.
  WH_RETURN_IF_ERROR(FuseNBits(g, &r.fused_nbits));
  QdqFusionCounts q;
  WH_RETURN_IF_ERROR(FuseQdq(g, &q));
  r.fused_qdq = q.fused;
  r.int8_passthrough = q.passthrough;
  if (q.fused + q.passthrough + r.fused_nbits > 0) {
    // Drop the Dequantize nodes nobody reads any more before folding would evaluate them.
    WH_RETURN_IF_ERROR(g.Compact());
    WH_RETURN_IF_ERROR(InferShapes(g));
    // Reads the ranks inference just gave the QConv outputs.
    WH_RETURN_IF_ERROR(FuseQConvMaxPool(g, &r.fused_qconv_pool));
  }
  WH_RETURN_IF_ERROR(FoldConstants(g, &r.folded_constants));
  // After folding: the regions' scalar operands must be constants by then.
  if (cpu_fusions) WH_RETURN_IF_ERROR(FuseLookupTables(g, &r.fused_lookup_tables));
  WH_RETURN_IF_ERROR(FoldConvBatchNorm(g, &r.folded_batchnorms));
  WH_RETURN_IF_ERROR(FoldPadIntoConv(g, &r.folded_into_conv));
  WH_RETURN_IF_ERROR(FoldConvAffine(g, &r.folded_into_conv));
  WH_RETURN_IF_ERROR(CropDeadConvTaps(g, &r.cropped_conv_taps));
  WH_RETURN_IF_ERROR(FuseGelu(g, &r.fused_gelu));
  WH_RETURN_IF_ERROR(FuseLayerNorm(g, &r.fused_layernorm));
  // RMSNormalization has no CUDA kernel: a device session keeps the written-out form on the device.
  if (cpu_fusions) WH_RETURN_IF_ERROR(FuseRmsNorm(g, &r.fused_layernorm));
  WH_RETURN_IF_ERROR(FuseConvAdd(g, &r.fused_conv_add));
  WH_RETURN_IF_ERROR(FuseMatMulBias(g, &r.fused_matmul_bias));
  WH_RETURN_IF_ERROR(FuseAttention(g, &r.fused_attention));
  if (cpu_fusions) WH_RETURN_IF_ERROR(FuseCacheAttention(g, &r.fused_cache_attention));
  WH_RETURN_IF_ERROR(FuseActivations(g, &r.fused_activations));
  if (nchwc_block) {
    // The conversion reads channel counts off the shapes the fusions left.
    WH_RETURN_IF_ERROR(g.Compact());
    WH_RETURN_IF_ERROR(InferShapes(g));
    WH_RETURN_IF_ERROR(ConvertToNchwc(g, *nchwc_block, &r.nchwc_nodes));
  }
  WH_RETURN_IF_ERROR(g.Compact());
  WH_RETURN_IF_ERROR(g.Verify());
  WH_RETURN_IF_ERROR(InferShapes(g));
  return r;
}

}  // namespace whittle
