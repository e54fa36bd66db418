// The decoder-LLM ops of ai.onnx opset 23 (what torch.onnx's dynamo exporter writes at opset 23):
//   Attention(Q, K, V [, attn_mask] [, past_key, past_value] [, nonpad_kv_seqlen]) -> Y
//     [, present_key, present_value] [, qk_matmul_output]: scaled dot-product attention with
//     grouped-query heads (q_num_heads a multiple of kv_num_heads), a causal or given (bool or
//     additive) mask, softcap, and a KV cache (present = past with this call's keys / values
//     appended on the sequence axis). Q, K, V are [B, S, heads * head_size] (3-D, with
//     q_num_heads / kv_num_heads) or [B, heads, S, head_size]. Opset 24 adds nonpad_kv_seqlen [B]
//     (an external cache: keys from it on are padding, and query i sits at position
//     nonpad_kv_seqlen - S + i for the causal mask); 25 a sliding window (left_window_size,
//     right_window_size; -1, the default, leaves a side open).
//   RotaryEmbedding(X, cos_cache, sin_cache [, position_ids]) -> Y: the first rotary_embedding_dim
//     channels of each head rotated in pairs (halves, or adjacent pairs when interleaved).
//   RMSNormalization(X, scale) -> Y = X / sqrt(mean(X^2 over axes >= axis) + epsilon) * scale.
// Semantics as the onnx package's reference (onnx/reference/ops/op_attention.py and neighbours)
// defines them; kernels in kernels/onnx_attention_kernels.cc.
#include <string>

#include "lib/ir/domain.h"
#include "lib/ops/op_def.h"

namespace whittle {
namespace {

Dim Sum(const Dim& a, const Dim& b) { return a.known() && b.known() ? Dim(a.value + b.value) : Dim(); }

bool IsFloat(DType t) { return t == DType::kFloat32; }

Status CheckAttention(const Node& n, int opset) {
  for (const char* w : {"left_window_size", "right_window_size"}) {
    if (!n.attrs.Has(w)) continue;
    if (n.domain.empty() && opset < 25)
      return InvalidArgument(n.DebugName() + ": Attention has the " + w + " attribute from opset 25");
    if (n.attrs.GetInt(w, -1) < -1)
      return InvalidArgument(n.DebugName() + ": " + w + " must be -1 or >= 0, got " + std::to_string(n.attrs.GetInt(w, -1)));
  }
  if (n.domain.empty() && opset < 24 && n.inputs.size() > 6 && n.inputs[6] >= 0)
    return InvalidArgument(n.DebugName() + ": Attention has the nonpad_kv_seqlen input from opset 24");
  const int64_t mode = n.attrs.GetInt("qk_matmul_output_mode", 0);
  if (mode < 0 || mode > 3)
    return InvalidArgument(n.DebugName() + ": qk_matmul_output_mode " + std::to_string(mode) + " is not 0..3");
  if (n.attrs.Has("q_num_heads") != n.attrs.Has("kv_num_heads"))
    return InvalidArgument(n.DebugName() + ": q_num_heads and kv_num_heads come together");
  if (n.attrs.Has("q_num_heads")) {
    const int64_t qh = n.attrs.GetInt("q_num_heads", 0), kvh = n.attrs.GetInt("kv_num_heads", 0);
    if (qh < 1 || kvh < 1 || qh % kvh != 0)
      return InvalidArgument(n.DebugName() + ": q_num_heads " + std::to_string(qh) + " must be a positive multiple of "
                             "kv_num_heads " + std::to_string(kvh));
  }
  const float softcap = n.attrs.GetFloat("softcap", 0.f);
  if (!(softcap >= 0.f)) return InvalidArgument(n.DebugName() + ": softcap must be >= 0");
  if (n.attrs.Has("scale") && !(n.attrs.GetFloat("scale", 1.f) > 0.f))
    return InvalidArgument(n.DebugName() + ": scale must be > 0");
  // Whittle computes the softmax in float32: float (1) is what that is; double, float16 and
  // bfloat16 would round differently.
  if (n.attrs.Has("softmax_precision") && n.attrs.GetInt("softmax_precision", 1) != 1)
    return Unimplemented(n.DebugName() + ": softmax_precision " + std::to_string(n.attrs.GetInt("softmax_precision", 1)) +
                         " is not supported (float, 1, is)");
  return Status::Ok();
}

Status InferAttention(InferContext& ctx) {
  for (int i : {0, 1, 2})
    if (!IsFloat(ctx.InputDType(i))) return ctx.Error("Q, K and V must be float32");
  if (ctx.HasInput(4) != ctx.HasInput(5)) return ctx.Error("past_key and past_value come together");
  for (int i : {4, 5})
    if (ctx.HasInput(i) && !IsFloat(ctx.InputDType(i))) return ctx.Error("past_key and past_value must be float32");
  if (ctx.HasInput(3) && !IsFloat(ctx.InputDType(3)) && ctx.InputDType(3) != DType::kBool)
    return ctx.Error("attn_mask must be bool or float32");
  if (ctx.HasInput(6)) {
    if (ctx.InputDType(6) != DType::kInt64) return ctx.Error("nonpad_kv_seqlen must be int64");
    if (ctx.HasInput(4)) return ctx.Error("nonpad_kv_seqlen cannot be combined with past_key and past_value");
  }
  const SymShape *q = ctx.InputShape(0), *k = ctx.InputShape(1), *v = ctx.InputShape(2);
  const SymShape* past = ctx.HasInput(4) ? ctx.InputShape(4) : nullptr;
  for (int i = 0; i < ctx.num_outputs(); ++i)
    if (ctx.HasOutput(i)) ctx.SetOutput(i, DType::kFloat32, std::nullopt);
  if (!q || !k || !v) return Status::Ok();
  if (q->size() != k->size() || q->size() != v->size() || (q->size() != 3 && q->size() != 4))
    return ctx.Error("Q, K and V must all be 3-D or all 4-D, got " + SymShapeToString(*q) + ", " +
                     SymShapeToString(*k) + ", " + SymShapeToString(*v));
  const bool three = q->size() == 3;
  if (three && !ctx.attrs().Has("q_num_heads")) return ctx.Error("3-D inputs need q_num_heads and kv_num_heads");
  const int64_t qh_attr = ctx.attrs().GetInt("q_num_heads", 0), kvh_attr = ctx.attrs().GetInt("kv_num_heads", 0);
  auto div = [](const Dim& d, int64_t by) { return d.known() ? Dim(d.value / by) : Dim(); };
  const Dim batch = (*q)[0];
  const Dim qh = three ? Dim(qh_attr) : (*q)[1], kvh = three ? Dim(kvh_attr) : (*k)[1];
  const Dim q_seq = three ? (*q)[1] : (*q)[2], kv_seq = three ? (*k)[1] : (*k)[2];
  const Dim head = three ? div((*q)[2], qh_attr) : (*q)[3];
  const Dim v_head = three ? div((*v)[2], kvh_attr) : (*v)[3];
  const Dim past_seq = past && past->size() == 4 ? (*past)[2] : Dim(ctx.HasInput(4) ? -1 : 0);
  const Dim total = Sum(past_seq, kv_seq);
  if (ctx.HasOutput(0))
    ctx.SetOutput(0, DType::kFloat32,
                  three ? SymShape{batch, q_seq, qh.known() && v_head.known() ? Dim(qh.value * v_head.value) : Dim()}
                        : SymShape{batch, qh, q_seq, v_head});
  if (ctx.HasOutput(1)) ctx.SetOutput(1, DType::kFloat32, SymShape{batch, kvh, total, head});
  if (ctx.HasOutput(2)) ctx.SetOutput(2, DType::kFloat32, SymShape{batch, kvh, total, v_head});
  if (ctx.HasOutput(3)) ctx.SetOutput(3, DType::kFloat32, SymShape{batch, qh, q_seq, total});
  return Status::Ok();
}

Status CheckRotary(const Node& n, int) {
  if (n.attrs.GetInt("rotary_embedding_dim", 0) < 0 || n.attrs.GetInt("num_heads", 0) < 0)
    return InvalidArgument(n.DebugName() + ": rotary_embedding_dim and num_heads must be >= 0");
  return Status::Ok();
}

Status InferRotary(InferContext& ctx) {
  for (int i : {0, 1, 2})
    if (!IsFloat(ctx.InputDType(i))) return ctx.Error("input, cos_cache and sin_cache must be float32");
  if (ctx.HasInput(3) && ctx.InputDType(3) != DType::kInt64) return ctx.Error("position_ids must be int64");
  const SymShape* x = ctx.InputShape(0);
  if (x && x->size() != 3 && x->size() != 4) return ctx.Error("input must be 3-D or 4-D, got " + SymShapeToString(*x));
  ctx.SetOutput(0, DType::kFloat32, x ? std::optional<SymShape>(*x) : std::nullopt);
  return Status::Ok();
}

Status CheckRmsNorm(const Node& n, int) {
  if (n.attrs.GetInt("stash_type", 1) != 1)
    return Unimplemented(n.DebugName() + ": stash_type " + std::to_string(n.attrs.GetInt("stash_type", 1)) +
                         " is not supported (float, 1, is)");
  if (!(n.attrs.GetFloat("epsilon", 1e-5f) >= 0.f)) return InvalidArgument(n.DebugName() + ": epsilon must be >= 0");
  return Status::Ok();
}

Status InferRmsNorm(InferContext& ctx) {
  if (!IsFloat(ctx.InputDType(0)) || !IsFloat(ctx.InputDType(1))) return ctx.Error("X and scale must be float32");
  const SymShape* x = ctx.InputShape(0);
  if (x) {
    const int64_t r = static_cast<int64_t>(x->size()), axis = ctx.attrs().GetInt("axis", -1);
    if (axis < -r || axis >= r) return ctx.Error("axis " + std::to_string(axis) + " is outside rank " + std::to_string(r));
  }
  ctx.SetOutput(0, DType::kFloat32, x ? std::optional<SymShape>(*x) : std::nullopt);
  return Status::Ok();
}

}  // namespace

void RegisterOnnxAttentionOps(OpRegistry& r) {
  // Opset 24: the nonpad_kv_seqlen input (7th); 25: left_window_size / right_window_size.
  OpDef attention{"", "Attention", 23, 3, 7, 1, 4,
                  {{"is_causal", AttrType::kInt},
                   {"kv_num_heads", AttrType::kInt},
                   {"left_window_size", AttrType::kInt},
                   {"right_window_size", AttrType::kInt},
                   {"q_num_heads", AttrType::kInt},
                   {"qk_matmul_output_mode", AttrType::kInt},
                   {"scale", AttrType::kFloat},
                   {"softcap", AttrType::kFloat},
                   {"softmax_precision", AttrType::kInt}},
                  CheckAttention,
                  InferAttention};
  attention.max_opset = 25;
  // The runtime's own copy for graphs of any opset (runtime/rewrite/fuse_cache_attention.h fuses an
  // opset-17 export's MatMul/Softmax attention into it), with the additive mask broadcasting on
  // every axis as the Add it replaces did; never saved.
  OpDef grouped = attention;
  grouped.domain = kWhittleDomain;
  grouped.op_type = "GroupedAttention";
  grouped.since_opset = 1;
  grouped.max_opset = 17;  // as every ai.whittle op: the ai.onnx opset check does not apply
  grouped.max_inputs = 6;
  r.Register(std::move(attention));
  r.Register(std::move(grouped));
  OpDef rotary{"", "RotaryEmbedding", 23, 3, 4, 1, 1,
               {{"interleaved", AttrType::kInt}, {"num_heads", AttrType::kInt}, {"rotary_embedding_dim", AttrType::kInt}},
               CheckRotary,
               InferRotary};
  rotary.max_opset = 23;
  r.Register(std::move(rotary));
  OpDef rms{"", "RMSNormalization", 23, 2, 2, 1, 1,
            {{"axis", AttrType::kInt}, {"epsilon", AttrType::kFloat}, {"stash_type", AttrType::kInt}},
            CheckRmsNorm,
            InferRmsNorm};
  rms.max_opset = 23;
  r.Register(std::move(rms));
}

}  // namespace whittle
