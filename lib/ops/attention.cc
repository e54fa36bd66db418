// ai.whittle Attention (runtime-internal, made by runtime/rewrite/fuse_attention.h, never saved):
//   Y = Attention(QKV [, S] [, MASK])   heads=H, head_dim=d, scale=s (times S, a one-element float,
//   if given); MASK (float, broadcasting to [B, H, N, N]) is added to the scaled scores before the
//   softmax
// QKV [B, N, 3*H*d] holds, per token, the queries, keys and values of every head (timm/ViT's
// packed qkv projection); Y [B, N, H*d] is, per head h, softmax(s * Q_h K_h^T) V_h written at
// columns h*d..(h+1)*d — what the exported Reshape/Transpose/Split/Squeeze/MatMul/Mul/Softmax/
// MatMul/Transpose/Reshape chain computes, with its transposes folded into strides.
#include <string>

#include "lib/ops/op_def.h"

namespace whittle {
namespace {

Status InferAttention(InferContext& ctx) {
  const SymShape* x = ctx.InputShape(0);
  const int64_t h = ctx.attrs().GetInt("heads", 0), d = ctx.attrs().GetInt("head_dim", 0);
  if (ctx.InputDType(0) != DType::kFloat32) return ctx.Error("QKV must be float32");
  if (!x) {
    ctx.SetOutput(0, DType::kFloat32, std::nullopt);
    return Status::Ok();
  }
  if (x->size() != 3) return ctx.Error("QKV must be [B, N, 3*heads*head_dim], got " + SymShapeToString(*x));
  if ((*x)[2].known() && (*x)[2].value != 3 * h * d)
    return ctx.Error("QKV's last dim " + std::to_string((*x)[2].value) + " is not 3 * heads * head_dim = " +
                     std::to_string(3 * h * d));
  ctx.SetOutput(0, DType::kFloat32, SymShape{(*x)[0], (*x)[1], Dim(h * d)});
  return Status::Ok();
}

}  // namespace

void RegisterAttentionOps(OpRegistry& r) {
  r.Register(OpDef{kWhittleDomain, "Attention", 1, 1, 3, 1, 1,
                   {{"heads", AttrType::kInt, true}, {"head_dim", AttrType::kInt, true}, {"scale", AttrType::kFloat, true}},
                   [](const Node& n, int) {
                     if (n.attrs.GetInt("heads", 0) < 1 || n.attrs.GetInt("head_dim", 0) < 1)
                       return InvalidArgument(n.DebugName() + ": heads and head_dim must be >= 1");
                     return Status::Ok();
                   },
                   InferAttention});
}

}  // namespace whittle
