// Runtime-internal ops (domain ai.whittle) of the blocked channel layout that the CPU runtime's
// NCHWc rewrite (runtime/rewrite/nchwc.h) puts between convolutions: a float tensor
// [N, C, H, W] is held as [N, C/b, H, W, b] (b = 8 or 16, the block of channels one vector holds;
// block=0 means one block of all C channels, [N, 1, H, W, C]: NHWC), so oneDNN's convolutions read
// and write it without a reorder per call. Never in saved models.
//   ToNchwc(X)              block=b: [N, C, H, W] -> [N, C/b, H, W, b] (C a multiple of b)
//   FromNchwc(X)            channels=C: the inverse
//   NchwcConv(X, W, [B], [S]) Conv's attributes and fused activation, block=b, plain_input=0|1:
//                           X blocked (or plain [N, C, H, W] when plain_input=1), W [M, C, kh, kw]
//                           (group 1) or [C, 1, kh, kw] (depthwise: group = M = C, X blocked), S a
//                           blocked residual added before the activation; output
//                           blocked [N, M/b, OH, OW, b] (b = M for block 0)
//   NchwcPool(X)            pool=MaxPool|AveragePool|GlobalMaxPool|GlobalAveragePool and that op's
//                           window attributes, on a blocked X; output blocked
#include <string>
#include <vector>

#include "lib/ops/op_def.h"
#include "lib/ops/window.h"

namespace whittle {
namespace {


Status CheckBlock(const Node& n) {
  const int64_t b = n.attrs.GetInt("block", -1);
  if (b != 0 && b != 8 && b != 16)
    return InvalidArgument(n.DebugName() + ": block must be 0 (all channels), 8 or 16, got " + std::to_string(b));
  return Status::Ok();
}

// [N, C/b, H, W, b] for a channel dim c and block attribute `block` (0: b = C).
SymShape BlockedShape(const Dim& n, const Dim& c, const Dim& h, const Dim& w, int64_t block) {
  if (block == 0) return {n, Dim(1), h, w, c};
  return {n, c.known() ? Dim(c.value / block) : Dim(), h, w, Dim(block)};
}

Status InferToNchwc(InferContext& ctx) {
  const SymShape* x = ctx.InputShape(0);
  const int64_t b = ctx.attrs().GetInt("block", 16);
  if (!x) {
    ctx.SetOutput(0, ctx.InputDType(0), std::nullopt);
    return Status::Ok();
  }
  if (x->size() != 4) return ctx.Error("X must be [N, C, H, W], got " + SymShapeToString(*x));
  if (b > 0 && (*x)[1].known() && (*x)[1].value % b != 0)
    return ctx.Error("channels " + std::to_string((*x)[1].value) + " are not a multiple of the block " +
                     std::to_string(b));
  if (b == 0 && !(*x)[1].known()) return ctx.Error("block 0 (all channels) needs a known channel count");
  ctx.SetOutput(0, ctx.InputDType(0), BlockedShape((*x)[0], (*x)[1], (*x)[2], (*x)[3], b));
  return Status::Ok();
}

Status CheckBlocked(const InferContext& ctx, const SymShape& x) {
  if (x.size() != 5 || !x[4].known() || x[4].value < 1)
    return ctx.Error("X must be blocked [N, C/b, H, W, b], got " + SymShapeToString(x));
  return Status::Ok();
}

Status InferFromNchwc(InferContext& ctx) {
  const SymShape* x = ctx.InputShape(0);
  const int64_t c = ctx.attrs().GetInt("channels", 0);
  if (!x) {
    ctx.SetOutput(0, ctx.InputDType(0), std::nullopt);
    return Status::Ok();
  }
  WH_RETURN_IF_ERROR(CheckBlocked(ctx, *x));
  if ((*x)[1].known() && (*x)[1].value * (*x)[4].value != c)
    return ctx.Error("channels=" + std::to_string(c) + " does not fill " + SymShapeToString(*x));
  ctx.SetOutput(0, ctx.InputDType(0), SymShape{(*x)[0], Dim(c), (*x)[2], (*x)[3]});
  return Status::Ok();
}

Status InferNchwcConv(InferContext& ctx) {
  const SymShape* x = ctx.InputShape(0);
  const SymShape* w = ctx.InputShape(1);
  const int64_t b = ctx.attrs().GetInt("block", 16);
  const bool plain = ctx.attrs().GetInt("plain_input", 0) != 0;
  if (!x || !w) {
    ctx.SetOutput(0, DType::kFloat32, std::nullopt);
    return Status::Ok();
  }
  if (plain && x->size() != 4) return ctx.Error("X must be [N, C, H, W], got " + SymShapeToString(*x));
  if (!plain) WH_RETURN_IF_ERROR(CheckBlocked(ctx, *x));
  if (w->size() != 4) return ctx.Error("W must be [M, C, kh, kw], got " + SymShapeToString(*w));
  for (const Dim& d : *w)
    if (!d.known()) return ctx.Error("W's dims must be known");
  const int64_t group = ctx.attrs().GetInt("group", 1);
  const Dim c = plain ? (*x)[1] : ((*x)[1].known() ? Dim((*x)[1].value * (*x)[4].value) : Dim());
  if (c.known() && c.value != (*w)[1].value * group)
    return ctx.Error("X has " + std::to_string(c.value) + " channels, W expects " + std::to_string((*w)[1].value * group));
  if (group != 1 && ((*w)[1].value != 1 || (*w)[0].value != group || plain))
    return ctx.Error("a grouped NchwcConv must be depthwise (W [C, 1, kh, kw], group = C) on a blocked X");
  if (b > 0 && (*w)[0].value % b != 0) return ctx.Error("output channels are not a multiple of the block");
  SymShape spatial;
  WH_RETURN_IF_ERROR(InferWindowOutput(ctx, SymShape{(*x)[2], (*x)[3]}, {(*w)[2].value, (*w)[3].value}, &spatial));
  ctx.SetOutput(0, DType::kFloat32, BlockedShape((*x)[0], (*w)[0], spatial[0], spatial[1], b));
  return Status::Ok();
}

Status InferNchwcPool(InferContext& ctx) {
  const SymShape* x = ctx.InputShape(0);
  if (!x) {
    ctx.SetOutput(0, ctx.InputDType(0), std::nullopt);
    return Status::Ok();
  }
  WH_RETURN_IF_ERROR(CheckBlocked(ctx, *x));
  const std::string pool = ctx.attrs().GetString("pool", "");
  if (pool == "GlobalAveragePool" || pool == "GlobalMaxPool") {
    ctx.SetOutput(0, ctx.InputDType(0), SymShape{(*x)[0], (*x)[1], Dim(1), Dim(1), (*x)[4]});
    return Status::Ok();
  }
  const std::vector<int64_t> kernel = ctx.attrs().GetInts("kernel_shape");
  if (kernel.size() != 2) return ctx.Error("kernel_shape must have 2 values");
  SymShape spatial;
  WH_RETURN_IF_ERROR(InferWindowOutput(ctx, SymShape{(*x)[2], (*x)[3]}, kernel, &spatial));
  ctx.SetOutput(0, ctx.InputDType(0), SymShape{(*x)[0], (*x)[1], spatial[0], spatial[1], (*x)[4]});
  return Status::Ok();
}

std::vector<AttrSpec> WindowSpecs() {
  return {{"auto_pad", AttrType::kString}, {"dilations", AttrType::kInts}, {"kernel_shape", AttrType::kInts},
          {"pads", AttrType::kInts},       {"strides", AttrType::kInts},   {"ceil_mode", AttrType::kInt},
          {"count_include_pad", AttrType::kInt}};
}

}  // namespace

void RegisterNchwcOps(OpRegistry& r) {
  r.Register(OpDef{kWhittleDomain, "ToNchwc", 1, 1, 1, 1, 1, {{"block", AttrType::kInt, true}},
                   [](const Node& n, int) { return CheckBlock(n); }, InferToNchwc});
  r.Register(OpDef{kWhittleDomain, "FromNchwc", 1, 1, 1, 1, 1, {{"channels", AttrType::kInt, true}}, nullptr,
                   InferFromNchwc});
  std::vector<AttrSpec> conv = WindowSpecs();
  conv.push_back({"group", AttrType::kInt});
  conv.push_back({"block", AttrType::kInt, true});
  conv.push_back({"plain_input", AttrType::kInt});
  r.Register(OpDef{kWhittleDomain, "NchwcConv", 1, 2, 4, 1, 1, conv,
                   [](const Node& n, int) {
                     WH_RETURN_IF_ERROR(CheckBlock(n));
                     if (n.attrs.GetInt("group", 1) < 1) return InvalidArgument(n.DebugName() + ": group must be >= 1");
                     return CheckWindowAttributes(n);
                   },
                   InferNchwcConv});
  std::vector<AttrSpec> pool = WindowSpecs();
  pool.push_back({"pool", AttrType::kString, true});
  r.Register(OpDef{kWhittleDomain, "NchwcPool", 1, 1, 1, 1, 1, pool,
                   [](const Node& n, int) {
                     const std::string p = n.attrs.GetString("pool", "");
                     if (p != "MaxPool" && p != "AveragePool" && p != "GlobalMaxPool" && p != "GlobalAveragePool")
                       return InvalidArgument(n.DebugName() + ": unknown pool '" + p + "'");
                     return CheckWindowAttributes(n);
                   },
                   InferNchwcPool});
}

}  // namespace whittle
