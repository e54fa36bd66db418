// QuantizeLinear and DequantizeLinear (opset 10: per-tensor; opset 13: per-axis via 'axis').
// Bad quantization parameters are rejected in inference, so a model whose scale/zero-point
// initializers are broken fails at load with the node named, not with garbage at run time:
// scale <= 0, NaN or Inf; per-axis lengths != dim[axis]; scale and zero-point shapes that
// differ; zero-point types other than int8/uint8 (int32 also for DequantizeLinear); bad axis.
#include <cmath>
#include <string>
#include <utility>

#include "lib/ops/op_def.h"
#include "lib/ops/shape_helpers.h"

namespace whittle {
namespace {

// A scalar or a one-element 1-D tensor: per-tensor parameters.
bool IsPerTensorShape(const SymShape& s) { return s.empty() || (s.size() == 1 && s[0] == Dim(1)); }

std::string Str(const SymShape& s) { return SymShapeToString(s); }

// A known scale must be positive and finite everywhere.
Status CheckScaleValues(const InferContext& ctx) {
  if (const Tensor* s = ctx.InputValue(1)) {
    const float* p = s->data<float>();
    for (int64_t i = 0; i < s->numel(); ++i)
      if (!(p[i] > 0.f) || !std::isfinite(p[i]))
        return ctx.Error("scale[" + std::to_string(i) + "] = " + std::to_string(p[i]) +
                         " is invalid: scales must be positive and finite");
  }
  return Status::Ok();
}

// Shared by both ops: input 0 is the tensor, input 1 the scale, input 2 the optional zero point.
// Blocked parameters (DequantizeLinear 21, block_size > 0): scale (and zero point) of x's rank
// with ceil(x[axis] / block_size) entries along axis and x's dims elsewhere.
Status CheckBlockedParams(const InferContext& ctx, int64_t block) {
  const SymShape* x = ctx.InputShape(0);
  for (int i : {1, 2}) {
    const SymShape* p = ctx.HasInput(i) ? ctx.InputShape(i) : nullptr;
    if (!x || !p) continue;
    const char* what = i == 1 ? "scale" : "zero_point";
    if (p->size() != x->size())
      return ctx.Error(std::string("blocked ") + what + " (block_size " + std::to_string(block) +
                       ") must have x's rank " + std::to_string(x->size()) + ", got shape " + Str(*p));
    const int64_t axis_attr = ctx.attrs().GetInt("axis", 1);
    auto axis = NormalizeAxis(axis_attr, static_cast<int64_t>(x->size()));
    if (!axis.ok())
      return ctx.Error("axis " + std::to_string(axis_attr) + " is out of range for x of rank " +
                       std::to_string(x->size()));
    for (size_t d = 0; d < x->size(); ++d) {
      const Dim& xd = (*x)[d];
      const Dim& pd = (*p)[d];
      if (!xd.known() || !pd.known()) continue;
      // ceil(x / block) without overflow for a hostile block_size near 2^63.
      const int64_t want =
          static_cast<int64_t>(d) == *axis ? (xd.value == 0 ? 0 : (xd.value - 1) / block + 1) : xd.value;
      if (pd.value != want)
        return ctx.Error(std::string("blocked ") + what + " shape " + Str(*p) + " does not fit x shape " + Str(*x) +
                         " with block_size " + std::to_string(block) + " along axis " + std::to_string(*axis) +
                         " (dim " + std::to_string(d) + " should be " + std::to_string(want) + ")");
    }
  }
  return Status::Ok();
}

Status CheckQuantParams(const InferContext& ctx, bool dequantize) {
  const DType x_dt = ctx.InputDType(0);
  if (dequantize) {
    const bool four_bit = IsPacked4Bit(x_dt);
    if (four_bit && ctx.opset() < 21)
      return ctx.Error(std::string("x of type ") + DTypeName(x_dt) + " needs opset 21 (this model imports opset " +
                       std::to_string(ctx.opset()) + ")");
    if (x_dt != DType::kInt8 && x_dt != DType::kUInt8 && x_dt != DType::kInt32 && !four_bit)
      return ctx.Error(std::string("x must be int8, uint8, int32, int4 or uint4, got ") + DTypeName(x_dt));
  } else if (x_dt != DType::kFloat32 && x_dt != DType::kInt32) {
    return ctx.Error(std::string("x must be float32 or int32, got ") + DTypeName(x_dt));
  }
  if (ctx.InputDType(1) != DType::kFloat32)
    return ctx.Error(std::string("scale must be float32, got ") + DTypeName(ctx.InputDType(1)));
  if (ctx.HasInput(2)) {
    const DType zp_dt = ctx.InputDType(2);
    if (dequantize) {
      if (zp_dt != x_dt)
        return ctx.Error(std::string("zero_point must have x's type ") + DTypeName(x_dt) + ", got " + DTypeName(zp_dt));
    } else if (zp_dt != DType::kInt8 && zp_dt != DType::kUInt8) {
      return ctx.Error(std::string("zero_point must be int8 or uint8, got ") + DTypeName(zp_dt));
    }
  }
  const SymShape* x = ctx.InputShape(0);
  const SymShape* scale = ctx.InputShape(1);
  const SymShape* zp = ctx.HasInput(2) ? ctx.InputShape(2) : nullptr;
  if (const int64_t block = ctx.attrs().GetInt("block_size", 0); dequantize && block > 0) {
    if (scale && zp && *scale != *zp)
      return ctx.Error("scale shape " + Str(*scale) + " and zero_point shape " + Str(*zp) + " differ");
    WH_RETURN_IF_ERROR(CheckBlockedParams(ctx, block));
    return CheckScaleValues(ctx);
  }
  if (scale && scale->size() > 1)
    return ctx.Error("scale must be a scalar or 1-D, got shape " + Str(*scale));
  if (scale && zp && !(IsPerTensorShape(*scale) && IsPerTensorShape(*zp)) && *scale != *zp)
    return ctx.Error("scale shape " + Str(*scale) + " and zero_point shape " + Str(*zp) + " differ");
  if (zp && !scale && zp->size() > 1)
    return ctx.Error("zero_point must be a scalar or 1-D, got shape " + Str(*zp));
  const SymShape* params = scale ? scale : zp;
  if (params && !IsPerTensorShape(*params)) {
    if (ctx.opset() < 13)
      return ctx.Error("per-axis parameters (shape " + Str(*params) + ") need opset 13; opset " +
                       std::to_string(ctx.opset()) + " allows a scalar scale only");
    if (x) {
      const int64_t r = static_cast<int64_t>(x->size());
      const int64_t axis_attr = ctx.attrs().GetInt("axis", 1);
      auto axis = NormalizeAxis(axis_attr, r);
      if (!axis.ok())
        return ctx.Error("axis " + std::to_string(axis_attr) + " is out of range for x of rank " + std::to_string(r));
      const Dim& d = (*x)[static_cast<size_t>(*axis)];
      const Dim& n = (*params)[0];
      if (d.known() && n.known() && d.value != n.value)
        return ctx.Error("per-axis scale/zero_point have " + std::to_string(n.value) + " entries but x has " +
                         std::to_string(d.value) + " along axis " + std::to_string(*axis) + " (x shape " + Str(*x) +
                         ")");
    }
  }
  return CheckScaleValues(ctx);
}

Status InferQuantize(InferContext& ctx) {
  WH_RETURN_IF_ERROR(CheckQuantParams(ctx, false));
  const int64_t out_attr = ctx.attrs().GetInt("output_dtype", 0);
  if (out_attr != 0 && ctx.HasInput(2) && static_cast<int64_t>(ctx.InputDType(2)) != out_attr)
    return ctx.Error("output_dtype " + std::to_string(out_attr) + " differs from the zero point's type " +
                     DTypeName(ctx.InputDType(2)));
  const DType out = ctx.HasInput(2) ? ctx.InputDType(2) : out_attr != 0 ? static_cast<DType>(out_attr) : DType::kUInt8;
  const SymShape* x = ctx.InputShape(0);
  ctx.SetOutput(0, out, x ? std::optional<SymShape>(*x) : std::nullopt);
  return Status::Ok();
}

Status InferDequantize(InferContext& ctx) {
  WH_RETURN_IF_ERROR(CheckQuantParams(ctx, true));
  const SymShape* x = ctx.InputShape(0);
  ctx.SetOutput(0, DType::kFloat32, x ? std::optional<SymShape>(*x) : std::nullopt);
  return Status::Ok();
}

Status CheckQuantAxis(const Node& node, int opset) {
  if (opset < 13 && node.attrs.Has("axis"))
    return InvalidArgument(node.DebugName() + ": attribute 'axis' needs opset 13 (this model imports opset " +
                           std::to_string(opset) + ")");
  if (node.attrs.Has("block_size")) {
    if (opset < 21)
      return InvalidArgument(node.DebugName() + ": attribute 'block_size' needs opset 21 (this model imports opset " +
                             std::to_string(opset) + ")");
    if (node.attrs.GetInt("block_size", 0) < 0)
      return InvalidArgument(node.DebugName() + ": block_size " + std::to_string(node.attrs.GetInt("block_size", 0)) +
                             " is negative");
  }
  return Status::Ok();
}

// ai.whittle Lookup (runtime/rewrite/fuse_lookup.h): x int8 or uint8, table 256 values of the
// output's type, indexed by x's byte read as unsigned; y has x's shape.
Status InferLookup(InferContext& ctx) {
  const DType x = ctx.InputDType(0), t = ctx.InputDType(1);
  if (x != DType::kUndefined && x != DType::kUInt8 && x != DType::kInt8)
    return ctx.Error(std::string("input must be int8 or uint8, got ") + DTypeName(x));
  const SymShape* ts = ctx.InputShape(1);
  if (ts && (ts->size() != 1 || ((*ts)[0].known() && (*ts)[0].value != 256)))
    return ctx.Error("table must be 1-D with 256 entries, got " + SymShapeToString(*ts));
  const SymShape* xs = ctx.InputShape(0);
  ctx.SetOutput(0, t, xs ? std::optional<SymShape>(*xs) : std::nullopt);
  return Status::Ok();
}

}  // namespace

void RegisterQuantOps(OpRegistry& r) {
  r.Register(OpDef{kWhittleDomain, "Lookup", 1, 2, 2, 1, 1, {}, nullptr, InferLookup});
  // QuantizeLinear's later attributes: saturate (19) only changes float8 outputs, which Whittle
  // does not make; block_size and output_dtype (21) and precision (23) are refused unless they
  // ask for what the op did before.
  OpDef q{"", "QuantizeLinear", 10, 2, 3, 1, 1,
          {{"axis", AttrType::kInt},
           {"block_size", AttrType::kInt},
           {"output_dtype", AttrType::kInt},
           {"precision", AttrType::kInt},
           {"saturate", AttrType::kInt}},
          [](const Node& n, int opset) -> Status {
            WH_RETURN_IF_ERROR(CheckQuantAxis(n, opset));
            const std::pair<const char*, int> since[] = {{"saturate", 19}, {"output_dtype", 21}, {"precision", 23}};
            for (const auto& [a, v] : since)
              if (n.attrs.Has(a) && opset < v)
                return InvalidArgument(n.DebugName() + ": attribute '" + a + "' needs opset " + std::to_string(v) +
                                       " (this model imports opset " + std::to_string(opset) + ")");
            if (n.attrs.GetInt("block_size", 0) > 0)
              return Unimplemented(n.DebugName() + ": blocked quantization (block_size " +
                                   std::to_string(n.attrs.GetInt("block_size", 0)) + ") is not supported");
            if (n.attrs.GetInt("precision", 0) != 0)
              return Unimplemented(n.DebugName() + ": precision " + std::to_string(n.attrs.GetInt("precision", 0)) +
                                   " is not supported (the default, 0, is)");
            const int64_t out = n.attrs.GetInt("output_dtype", 0);
            if (out != 0 && out != static_cast<int64_t>(DType::kUInt8) && out != static_cast<int64_t>(DType::kInt8))
              return Unimplemented(n.DebugName() + ": output_dtype " + std::to_string(out) +
                                   " is not supported (uint8 and int8 are)");
            return Status::Ok();
          },
          InferQuantize};
  r.Register(std::move(q));
  OpDef dq{"", "DequantizeLinear", 10, 2, 3, 1, 1, {{"axis", AttrType::kInt}, {"block_size", AttrType::kInt}},
            CheckQuantAxis, InferDequantize};
  dq.max_opset = 21;
  r.Register(std::move(dq));
}

}  // namespace whittle
