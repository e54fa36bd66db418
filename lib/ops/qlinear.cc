// OpDefs of the integer linear ops: the standard QOperator ops (QLinearConv, QLinearMatMul,
// MatMulInteger, ConvInteger, DynamicQuantizeLinear) and the runtime-internal fused ops
// ai.whittle QConv / QGemm created by the runtime's QDQ fusion (never written to files). QConv and
// QGemm take QLinearConv's / QLinearMatMul's inputs in the same order; y_scale / y_zero_point
// (6, 7) are optional — without y_scale the output is float32 — and input 8 is an int32 bias at
// scale x_scale * w_scale. Parameter values (scale > 0, per-axis lengths) are checked by kernels.
#include <optional>
#include <string>
#include <vector>

#include "lib/ops/op_def.h"
#include "lib/ops/shape_helpers.h"
#include "lib/ops/window.h"

namespace whittle {

namespace {


bool IsByteType(DType t) { return t == DType::kInt8 || t == DType::kUInt8; }

Status CheckByteInput(const InferContext& ctx, int i, const char* what) {
  if (!ctx.HasInput(i)) return Status::Ok();
  const DType t = ctx.InputDType(i);
  if (t != DType::kUndefined && !IsByteType(t))
    return ctx.Error(std::string(what) + " must be int8 or uint8, got " + DTypeName(t));
  return Status::Ok();
}

Status CheckScale(const InferContext& ctx, int i, const char* what) {
  if (!ctx.HasInput(i)) return Status::Ok();
  const DType t = ctx.InputDType(i);
  if (t != DType::kUndefined && t != DType::kFloat32)
    return ctx.Error(std::string(what) + " must be float32, got " + DTypeName(t));
  const SymShape* s = ctx.InputShape(i);
  if (s && s->size() > 1) return ctx.Error(std::string(what) + " must be a scalar or 1-D, got " + SymShapeToString(*s));
  return Status::Ok();
}

// Zero point zi must have data input di's type and be a scalar or 1-D.
Status CheckZeroPoint(const InferContext& ctx, int zi, int di, const char* what) {
  if (!ctx.HasInput(zi)) return Status::Ok();
  const DType z = ctx.InputDType(zi), d = ctx.InputDType(di);
  if (z != DType::kUndefined && d != DType::kUndefined && z != d)
    return ctx.Error(std::string(what) + " must have its data's type " + DTypeName(d) + ", got " + DTypeName(z));
  const SymShape* s = ctx.InputShape(zi);
  if (s && s->size() > 1) return ctx.Error(std::string(what) + " must be a scalar or 1-D, got " + SymShapeToString(*s));
  return Status::Ok();
}

// numpy matmul output shape of a x b (1-D operands promoted and the added dim dropped).
StatusOr<std::optional<SymShape>> MatMulShape(const InferContext& ctx, int ai, int bi) {
  const SymShape* a = ctx.InputShape(ai);
  const SymShape* b = ctx.InputShape(bi);
  if (!a || !b) return std::optional<SymShape>();
  if (a->empty() || b->empty()) return ctx.Error("matrix inputs must have rank >= 1");
  const bool a_vec = a->size() == 1, b_vec = b->size() == 1;
  const SymShape ad = a_vec ? SymShape{Dim(1), (*a)[0]} : *a;
  const SymShape bd = b_vec ? SymShape{(*b)[0], Dim(1)} : *b;
  const Dim ka = ad.back(), kb = bd[bd.size() - 2];
  if (ka.known() && kb.known() && ka.value != kb.value)
    return ctx.Error("inner dims differ: " + SymShapeToString(*a) + " x " + SymShapeToString(*b));
  auto batch = BroadcastShapes(SymShape(ad.begin(), ad.end() - 2), SymShape(bd.begin(), bd.end() - 2));
  if (!batch.ok()) return ctx.Error("batch dims: " + batch.status().message());
  SymShape out = *batch;
  if (!a_vec) out.push_back(ad[ad.size() - 2]);
  if (!b_vec) out.push_back(bd.back());
  return std::optional<SymShape>(out);
}

Status CheckBias(const InferContext& ctx, int i) {
  if (!ctx.HasInput(i)) return Status::Ok();
  const DType t = ctx.InputDType(i);
  if (t != DType::kUndefined && t != DType::kInt32)
    return ctx.Error(std::string("bias must be int32, got ") + DTypeName(t));
  const SymShape* b = ctx.InputShape(i);
  if (b && b->size() != 1) return ctx.Error("bias must be 1-D, got " + SymShapeToString(*b));
  return Status::Ok();
}

// QLinearConv / QLinearMatMul / QConv / QGemm share inputs 0..8.
Status CheckQLinearInputs(const InferContext& ctx) {
  const bool fused = ctx.node().domain == kWhittleDomain;
  WH_RETURN_IF_ERROR(CheckByteInput(ctx, 0, "x"));
  WH_RETURN_IF_ERROR(CheckScale(ctx, 1, "x_scale"));
  WH_RETURN_IF_ERROR(CheckZeroPoint(ctx, 2, 0, "x_zero_point"));
  WH_RETURN_IF_ERROR(CheckByteInput(ctx, 3, "w"));
  WH_RETURN_IF_ERROR(CheckScale(ctx, 4, "w_scale"));
  WH_RETURN_IF_ERROR(CheckZeroPoint(ctx, 5, 3, "w_zero_point"));
  WH_RETURN_IF_ERROR(CheckScale(ctx, 6, "y_scale"));
  WH_RETURN_IF_ERROR(CheckByteInput(ctx, 7, "y_zero_point"));
  if (!fused && (!ctx.HasInput(6) || !ctx.HasInput(7))) return ctx.Error("y_scale and y_zero_point are required");
  if (fused && ctx.HasInput(7) && !ctx.HasInput(6)) return ctx.Error("y_zero_point given without y_scale");
  return CheckBias(ctx, 8);
}

// Quantized with y_zero_point's type when y_scale is present (uint8 if no zero point), else float32.
DType OutputType(const InferContext& ctx) {
  if (!ctx.HasInput(6)) return DType::kFloat32;
  return ctx.HasInput(7) ? ctx.InputDType(7) : DType::kUInt8;
}

Status InferQLinearMatMul(InferContext& ctx) {
  WH_RETURN_IF_ERROR(CheckQLinearInputs(ctx));
  WH_ASSIGN_OR_RETURN(std::optional<SymShape> s, MatMulShape(ctx, 0, 3));
  ctx.SetOutput(0, OutputType(ctx), s);
  return Status::Ok();
}

// QGemm: a [..., K] x b [K, N] -> [..., N]; b must be 2-D (it is a prepacked constant).
Status InferQGemm(InferContext& ctx) {
  WH_RETURN_IF_ERROR(CheckQLinearInputs(ctx));
  const SymShape* b = ctx.InputShape(3);
  if (b && b->size() != 2) return ctx.Error("b must be 2-D [K, N], got " + SymShapeToString(*b));
  const SymShape* a = ctx.InputShape(0);
  if (a && a->empty()) return ctx.Error("a must have rank >= 1");
  WH_ASSIGN_OR_RETURN(std::optional<SymShape> s, MatMulShape(ctx, 0, 3));
  ctx.SetOutput(0, OutputType(ctx), s);
  return Status::Ok();
}

Status InferQConv(InferContext& ctx) {
  WH_RETURN_IF_ERROR(CheckQLinearInputs(ctx));
  WH_ASSIGN_OR_RETURN(std::optional<SymShape> s, InferConvOutput(ctx, 0, 3));
  if (s && ctx.attrs().Has("_max_pool")) {
    // QConv's fused max pool (runtime/rewrite/fuse_qconv_pool.h): window = stride, floor mode.
    const std::vector<int64_t> window = ctx.attrs().GetInts("_max_pool");
    if (window.size() + 2 != s->size())
      return ctx.Error("_max_pool has " + std::to_string(window.size()) + " entries for " +
                       std::to_string(s->size() - 2) + " spatial dims");
    for (size_t i = 0; i < window.size(); ++i) {
      Dim& d = (*s)[i + 2];
      if (!d.known()) {
        d = Dim();
        continue;
      }
      if (d.value < window[i])
        return ctx.Error("_max_pool window " + std::to_string(window[i]) + " is larger than the conv output (" +
                         std::to_string(d.value) + ")");
      d = Dim(d.value / window[i]);
    }
  }
  ctx.SetOutput(0, OutputType(ctx), s);
  return Status::Ok();
}

Status InferMatMulInteger(InferContext& ctx) {
  WH_RETURN_IF_ERROR(CheckByteInput(ctx, 0, "A"));
  WH_RETURN_IF_ERROR(CheckByteInput(ctx, 1, "B"));
  WH_RETURN_IF_ERROR(CheckZeroPoint(ctx, 2, 0, "a_zero_point"));
  WH_RETURN_IF_ERROR(CheckZeroPoint(ctx, 3, 1, "b_zero_point"));
  WH_ASSIGN_OR_RETURN(std::optional<SymShape> s, MatMulShape(ctx, 0, 1));
  ctx.SetOutput(0, DType::kInt32, s);
  return Status::Ok();
}

Status InferConvInteger(InferContext& ctx) {
  WH_RETURN_IF_ERROR(CheckByteInput(ctx, 0, "x"));
  WH_RETURN_IF_ERROR(CheckByteInput(ctx, 1, "w"));
  WH_RETURN_IF_ERROR(CheckZeroPoint(ctx, 2, 0, "x_zero_point"));
  WH_RETURN_IF_ERROR(CheckZeroPoint(ctx, 3, 1, "w_zero_point"));
  WH_ASSIGN_OR_RETURN(std::optional<SymShape> s, InferConvOutput(ctx, 0, 1));
  ctx.SetOutput(0, DType::kInt32, s);
  return Status::Ok();
}

Status InferDynamicQuantizeLinear(InferContext& ctx) {
  const DType t = ctx.InputDType(0);
  if (t != DType::kUndefined && t != DType::kFloat32)
    return ctx.Error(std::string("x must be float32, got ") + DTypeName(t));
  const SymShape* x = ctx.InputShape(0);
  ctx.SetOutput(0, DType::kUInt8, x ? std::optional<SymShape>(*x) : std::nullopt);
  if (ctx.HasOutput(1)) ctx.SetOutput(1, DType::kFloat32, SymShape{});
  if (ctx.HasOutput(2)) ctx.SetOutput(2, DType::kUInt8, SymShape{});
  return Status::Ok();
}

Status CheckConvAttrs(const Node& node, int) {
  WH_RETURN_IF_ERROR(CheckWindowAttributes(node));
  const int64_t group = node.attrs.GetInt("group", 1);
  if (group < 1) return InvalidArgument(node.DebugName() + ": group must be >= 1, got " + std::to_string(group));
  return Status::Ok();
}

// The fused ops' optional activation: Relu, or Clip (bounds _min / _max; quantized output only,
// which the kernels check).
Status CheckActivation(const Node& node) {
  if (!node.attrs.Has("_activation")) return Status::Ok();
  const std::string act = node.attrs.GetString("_activation", "");
  if (act != "Relu" && act != "Clip")
    return InvalidArgument(node.DebugName() + ": unsupported _activation '" + act + "'");
  return Status::Ok();
}

std::vector<AttrSpec> ConvAttrs() {
  return {{"auto_pad", AttrType::kString}, {"dilations", AttrType::kInts}, {"group", AttrType::kInt},
          {"kernel_shape", AttrType::kInts}, {"pads", AttrType::kInts}, {"strides", AttrType::kInts}};
}

}  // namespace

void RegisterQLinearOps(OpRegistry& r) {
  r.Register(OpDef{"", "QLinearMatMul", 10, 8, 8, 1, 1, {}, nullptr, InferQLinearMatMul});
  r.Register(OpDef{"", "QLinearConv", 10, 8, 9, 1, 1, ConvAttrs(), CheckConvAttrs, InferQConv});
  r.Register(OpDef{"", "MatMulInteger", 10, 2, 4, 1, 1, {}, nullptr, InferMatMulInteger});
  r.Register(OpDef{"", "ConvInteger", 10, 2, 4, 1, 1, ConvAttrs(), CheckConvAttrs, InferConvInteger});
  r.Register(OpDef{"", "DynamicQuantizeLinear", 11, 1, 1, 3, 3, {}, nullptr, InferDynamicQuantizeLinear});

  const std::vector<AttrSpec> act_attrs = {
      {"_activation", AttrType::kString}, {"_min", AttrType::kFloat}, {"_max", AttrType::kFloat}};
  r.Register(OpDef{kWhittleDomain, "QGemm", 1, 6, 9, 1, 1, act_attrs,
                   [](const Node& n, int) { return CheckActivation(n); }, InferQGemm});
  std::vector<AttrSpec> qconv_attrs = ConvAttrs();
  qconv_attrs.insert(qconv_attrs.end(), act_attrs.begin(), act_attrs.end());
  qconv_attrs.push_back({"_max_pool", AttrType::kInts});
  r.Register(OpDef{kWhittleDomain, "QConv", 1, 6, 9, 1, 1, qconv_attrs,
                   [](const Node& n, int opset) {
                     WH_RETURN_IF_ERROR(CheckConvAttrs(n, opset));
                     for (int64_t k : n.attrs.GetInts("_max_pool"))
                       if (k < 1) return InvalidArgument(n.DebugName() + ": _max_pool windows must be >= 1");
                     return CheckActivation(n);
                   },
                   InferQConv});
}

}  // namespace whittle
