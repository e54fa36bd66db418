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

namespace whittle {

// lib/ops/conv.cc
Status CheckWindowAttributes(const Node& node);
Status InferWindowOutput(const InferContext& ctx, const SymShape& in, const std::vector<int64_t>& kernel,
                         SymShape* out);

namespace {

constexpr const char* kWhittleDomain = "ai.whittle";

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

// Conv output shape for data input xi and weight wi (same rules as Conv).
StatusOr<std::optional<SymShape>> ConvShape(const InferContext& ctx, int xi, int wi) {
  const SymShape* x = ctx.InputShape(xi);
  const SymShape* w = ctx.InputShape(wi);
  if (x && x->size() < 3) return ctx.Error("X must have rank >= 3 (N, C, spatial...), got " + SymShapeToString(*x));
  if (x && w && w->size() != x->size())
    return ctx.Error("W " + SymShapeToString(*w) + " must have the rank of X " + SymShapeToString(*x));
  if (!x) return std::optional<SymShape>();
  const int64_t group = ctx.attrs().GetInt("group", 1);
  Dim m;
  if (w) {
    m = (*w)[0];
    if (m.known() && m.value % group != 0)
      return ctx.Error("group " + std::to_string(group) + " does not divide the output channels of W " +
                       SymShapeToString(*w));
    if ((*x)[1].known() && (*w)[1].known() && (*x)[1].value != (*w)[1].value * group)
      return ctx.Error("X has " + std::to_string((*x)[1].value) + " channels but W " + SymShapeToString(*w) +
                       " with group " + std::to_string(group) + " expects " + std::to_string((*w)[1].value * group));
  }
  const size_t spatial = x->size() - 2;
  std::vector<int64_t> kernel(spatial, -1);
  const auto ks = ctx.attrs().GetInts("kernel_shape");
  for (size_t i = 0; i < spatial; ++i) {
    if (i < ks.size()) kernel[i] = ks[i];
    if (w && (*w)[i + 2].known()) {
      if (i < ks.size() && ks[i] != (*w)[i + 2].value)
        return ctx.Error("kernel_shape does not match W " + SymShapeToString(*w));
      kernel[i] = (*w)[i + 2].value;
    }
  }
  SymShape out_spatial;
  WH_RETURN_IF_ERROR(InferWindowOutput(ctx, SymShape(x->begin() + 2, x->end()), kernel, &out_spatial));
  SymShape out{(*x)[0], m};
  out.insert(out.end(), out_spatial.begin(), out_spatial.end());
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
  WH_ASSIGN_OR_RETURN(std::optional<SymShape> s, ConvShape(ctx, 0, 3));
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
  WH_ASSIGN_OR_RETURN(std::optional<SymShape> s, ConvShape(ctx, 0, 1));
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

// The fused ops' optional activation: only Relu is implemented.
Status CheckActivation(const Node& node) {
  if (!node.attrs.Has("_activation")) return Status::Ok();
  const std::string act = node.attrs.GetString("_activation", "");
  if (act != "Relu") return InvalidArgument(node.DebugName() + ": unsupported _activation '" + act + "'");
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

  r.Register(OpDef{kWhittleDomain, "QGemm", 1, 6, 9, 1, 1, {{"_activation", AttrType::kString}},
                   [](const Node& n, int) { return CheckActivation(n); }, InferQGemm});
  std::vector<AttrSpec> qconv_attrs = ConvAttrs();
  qconv_attrs.push_back({"_activation", AttrType::kString});
  r.Register(OpDef{kWhittleDomain, "QConv", 1, 6, 9, 1, 1, qconv_attrs,
                   [](const Node& n, int opset) {
                     WH_RETURN_IF_ERROR(CheckConvAttrs(n, opset));
                     return CheckActivation(n);
                   },
                   InferQConv});
}

}  // namespace whittle
