// Indexing ops: Size, GatherElements, Trilu, CumSum, EyeLike, OneHot, DepthToSpace, SpaceToDepth,
// TopK, GatherND, Scatter, ScatterElements, ScatterND and NonZero, as ONNX 1.12 defines them for
// opsets 7..17 (TopK's k became an input in opset 10; Scatter reductions appear in opset 16).
// Output shapes that depend on input values (OneHot depth, TopK k, NonZero's count) are unknown
// dims until the value is known; at run time it always is.
#include <algorithm>
#include <string>
#include <vector>

#include "lib/ops/op_def.h"
#include "lib/ops/shape_helpers.h"

namespace whittle {
namespace {

bool IsIndexType(DType t) { return t == DType::kInt64 || t == DType::kInt32; }

// Single element of a known numeric input as int64; *known false when not known yet.
Status ReadScalar(const InferContext& ctx, int i, const char* what, bool* known, int64_t* v) {
  const Tensor* t = ctx.InputValue(i);
  *known = t != nullptr;
  if (!t) return Status::Ok();
  if (t->numel() != 1) return ctx.Error(std::string(what) + " must have one element, got " + DimsToString(t->dims()));
  switch (t->dtype()) {
    case DType::kInt64:
      *v = t->data<int64_t>()[0];
      break;
    case DType::kInt32:
      *v = t->data<int32_t>()[0];
      break;
    case DType::kFloat32:
      *v = static_cast<int64_t>(t->data<float>()[0]);
      break;
    case DType::kFloat64:
      *v = static_cast<int64_t>(t->data<double>()[0]);
      break;
    default:
      return ctx.Error(std::string(what) + " has unsupported type " + DTypeName(t->dtype()));
  }
  return Status::Ok();
}

Status CheckBool(const Node& node, const char* name) {
  const int64_t v = node.attrs.GetInt(name, 0);
  if (v != 0 && v != 1)
    return InvalidArgument(node.DebugName() + ": " + name + " must be 0 or 1, got " + std::to_string(v));
  return Status::Ok();
}

// ---------------------------------------------------------------- Size, EyeLike

Status InferSize(InferContext& ctx) {
  ctx.SetOutput(0, DType::kInt64, SymShape{});
  return Status::Ok();
}

Status InferEyeLike(InferContext& ctx) {
  DType dt = ctx.InputDType(0);
  if (ctx.attrs().Has("dtype")) {
    const int64_t d = ctx.attrs().GetInt("dtype", 0);
    if (!IsSupportedDType(static_cast<int32_t>(d)) || d == static_cast<int64_t>(DType::kFloat16) ||
        d == static_cast<int64_t>(DType::kBFloat16))
      return ctx.Error("dtype " + std::to_string(d) + " is not supported");
    dt = static_cast<DType>(d);
  }
  const SymShape* in = ctx.InputShape(0);
  if (in && in->size() != 2) return ctx.Error("input must be 2-D, got " + SymShapeToString(*in));
  ctx.SetOutput(0, dt, in ? std::optional<SymShape>(*in) : std::optional<SymShape>(SymShape(2, Dim())));
  return Status::Ok();
}

// ---------------------------------------------------------------- GatherElements, Scatter*

Status InferGatherElements(InferContext& ctx) {
  if (!IsIndexType(ctx.InputDType(1))) return ctx.Error("indices must be int32 or int64");
  const SymShape* data = ctx.InputShape(0);
  const SymShape* idx = ctx.InputShape(1);
  if (data && idx && data->size() != idx->size())
    return ctx.Error("data " + SymShapeToString(*data) + " and indices " + SymShapeToString(*idx) +
                     " must have the same rank");
  if (data) {
    auto a = NormalizeAxis(ctx.attrs().GetInt("axis", 0), static_cast<int64_t>(data->size()));
    if (!a.ok()) return ctx.Error(a.status().message());
  }
  ctx.SetOutput(0, ctx.InputDType(0), idx ? std::optional<SymShape>(*idx) : std::nullopt);
  return Status::Ok();
}

Status CheckScatter(const Node& node, int opset) {
  if (node.attrs.Has("reduction")) {
    if (opset < 16) return InvalidArgument(node.DebugName() + ": attribute 'reduction' needs opset 16");
    const std::string r = node.attrs.GetString("reduction", "none");
    if (r != "none" && r != "add" && r != "mul")
      return InvalidArgument(node.DebugName() + ": reduction must be none, add or mul, got '" + r + "'");
  }
  return Status::Ok();
}

Status InferScatterElements(InferContext& ctx) {
  if (!IsIndexType(ctx.InputDType(1))) return ctx.Error("indices must be int32 or int64");
  if (ctx.InputDType(2) != ctx.InputDType(0)) return ctx.Error("updates must have data's type");
  const SymShape* data = ctx.InputShape(0);
  const SymShape* idx = ctx.InputShape(1);
  if (data && idx && data->size() != idx->size())
    return ctx.Error("indices " + SymShapeToString(*idx) + " must have the rank of data " + SymShapeToString(*data));
  if (data) {
    auto a = NormalizeAxis(ctx.attrs().GetInt("axis", 0), static_cast<int64_t>(data->size()));
    if (!a.ok()) return ctx.Error(a.status().message());
  }
  return InferSameAsInput0(ctx);
}

Status InferScatterND(InferContext& ctx) {
  if (!IsIndexType(ctx.InputDType(1))) return ctx.Error("indices must be int32 or int64");
  if (ctx.InputDType(2) != ctx.InputDType(0)) return ctx.Error("updates must have data's type");
  const SymShape* data = ctx.InputShape(0);
  const SymShape* idx = ctx.InputShape(1);
  if (idx && idx->empty()) return ctx.Error("indices must have rank >= 1");
  if (data && idx && idx->back().known() &&
      (idx->back().value < 1 || idx->back().value > static_cast<int64_t>(data->size())))
    return ctx.Error("indices last dim " + std::to_string(idx->back().value) + " must be in [1, " +
                     std::to_string(data->size()) + "]");
  return InferSameAsInput0(ctx);
}

// ---------------------------------------------------------------- GatherND

Status InferGatherND(InferContext& ctx) {
  if (ctx.InputDType(1) != DType::kInt64) return ctx.Error("indices must be int64");
  const SymShape* data = ctx.InputShape(0);
  const SymShape* idx = ctx.InputShape(1);
  const int64_t b = ctx.attrs().GetInt("batch_dims", 0);
  if (idx && idx->empty()) return ctx.Error("indices must have rank >= 1");  // before back()
  if (!data || !idx || !idx->back().known()) {
    ctx.SetOutput(0, ctx.InputDType(0), std::nullopt);
    return Status::Ok();
  }
  const int64_t r = static_cast<int64_t>(data->size()), q = static_cast<int64_t>(idx->size());
  if (q < 1) return ctx.Error("indices must have rank >= 1");
  if (b < 0 || b >= std::min(q, r))
    return ctx.Error("batch_dims " + std::to_string(b) + " must be in [0, min(rank(data), rank(indices)))");
  const int64_t last = idx->back().value;
  if (last < 1 || b + last > r)
    return ctx.Error("indices last dim " + std::to_string(last) + " with batch_dims " + std::to_string(b) +
                     " does not fit data of rank " + std::to_string(r));
  SymShape out(idx->begin(), idx->end() - 1);
  for (int64_t d = 0; d < b; ++d) {
    const Dim& dd = (*data)[static_cast<size_t>(d)];
    const Dim& di = (*idx)[static_cast<size_t>(d)];
    if (dd.known() && di.known() && dd.value != di.value)
      return ctx.Error("batch dim " + std::to_string(d) + " differs between data and indices");
  }
  out.insert(out.end(), data->begin() + b + last, data->end());
  ctx.SetOutput(0, ctx.InputDType(0), out);
  return Status::Ok();
}

// ---------------------------------------------------------------- Trilu, CumSum

Status InferTrilu(InferContext& ctx) {
  const SymShape* in = ctx.InputShape(0);
  if (in && in->size() < 2) return ctx.Error("input must have rank >= 2, got " + SymShapeToString(*in));
  if (ctx.HasInput(1) && !IsIndexType(ctx.InputDType(1))) return ctx.Error("k must be int64");
  return InferSameAsInput0(ctx);
}

Status InferCumSum(InferContext& ctx) {
  const SymShape* in = ctx.InputShape(0);
  if (!IsIndexType(ctx.InputDType(1))) return ctx.Error("axis must be int32 or int64");
  bool known = false;
  int64_t axis = 0;
  WH_RETURN_IF_ERROR(ReadScalar(ctx, 1, "axis", &known, &axis));
  if (known && in) {
    auto a = NormalizeAxis(axis, static_cast<int64_t>(in->size()));
    if (!a.ok()) return ctx.Error(a.status().message());
  }
  return InferSameAsInput0(ctx);
}

// ---------------------------------------------------------------- OneHot

Status InferOneHot(InferContext& ctx) {
  const SymShape* idx = ctx.InputShape(0);
  const DType dt = ctx.InputDType(2);
  const SymShape* vals = ctx.InputShape(2);
  if (vals && vals->size() != 1) return ctx.Error("values must be 1-D [off, on], got " + SymShapeToString(*vals));
  if (!idx) {
    ctx.SetOutput(0, dt, std::nullopt);
    return Status::Ok();
  }
  auto a = NormalizeAxis(ctx.attrs().GetInt("axis", -1), static_cast<int64_t>(idx->size()) + 1);
  if (!a.ok()) return ctx.Error(a.status().message());
  bool known = false;
  int64_t depth = 0;
  WH_RETURN_IF_ERROR(ReadScalar(ctx, 1, "depth", &known, &depth));
  if (known && depth < 1) return ctx.Error("depth must be >= 1, got " + std::to_string(depth));
  SymShape out = *idx;
  out.insert(out.begin() + *a, known ? Dim(depth) : Dim());
  ctx.SetOutput(0, dt, out);
  return Status::Ok();
}

// ---------------------------------------------------------------- DepthToSpace, SpaceToDepth

Status CheckBlocksize(const Node& node, int opset) {
  if (node.op_type == "SpaceToDepth" && node.attrs.Has("mode") && opset < 28)
    return InvalidArgument(node.DebugName() + ": SpaceToDepth has the mode attribute from opset 28, the model's is " +
                           std::to_string(opset));
  if (node.attrs.GetInt("blocksize", 0) < 1)
    return InvalidArgument(node.DebugName() + ": blocksize must be >= 1, got " +
                           std::to_string(node.attrs.GetInt("blocksize", 0)));
  // SpaceToDepth has the mode attribute (default DCR, its only behaviour before) from opset 28.
  if (node.op_type == "DepthToSpace" || node.attrs.Has("mode")) {
    const std::string mode = node.attrs.GetString("mode", "DCR");
    if (mode != "DCR" && mode != "CRD")
      return InvalidArgument(node.DebugName() + ": mode must be DCR or CRD, got '" + mode + "'");
  }
  return Status::Ok();
}

Status InferSpaceDepth(InferContext& ctx, bool to_space) {
  const SymShape* in = ctx.InputShape(0);
  const int64_t b = ctx.attrs().GetInt("blocksize", 1);
  if (!in) {
    ctx.SetOutput(0, ctx.InputDType(0), SymShape(4, Dim()));
    return Status::Ok();
  }
  if (in->size() != 4) return ctx.Error("input must be 4-D NCHW, got " + SymShapeToString(*in));
  SymShape out = *in;
  const Dim& c = (*in)[1];
  int64_t b2 = 0;
  if (__builtin_mul_overflow(b, b, &b2)) return ctx.Error("blocksize " + std::to_string(b) + " squared passes 2^63");
  // Every product below is checked: dims and blocksize come from the model.
  auto times = [&](const Dim& d, int64_t f) -> StatusOr<Dim> {
    int64_t v = 0;
    if (!d.known()) return Dim();
    if (__builtin_mul_overflow(d.value, f, &v))
      return ctx.Error("dim " + std::to_string(d.value) + " times " + std::to_string(f) + " passes 2^63");
    return Dim(v);
  };
  if (to_space) {
    if (c.known() && c.value % b2 != 0)
      return ctx.Error("channels " + std::to_string(c.value) +
                       " not divisible by blocksize^2 = " + std::to_string(b2));
    out[1] = c.known() ? Dim(c.value / b2) : Dim();
    for (size_t d = 2; d < 4; ++d) {
      WH_ASSIGN_OR_RETURN(out[d], times((*in)[d], b));
    }
  } else {
    WH_ASSIGN_OR_RETURN(out[1], times(c, b2));
    for (size_t d = 2; d < 4; ++d) {
      const Dim& s = (*in)[d];
      if (s.known() && s.value % b != 0)
        return ctx.Error("spatial dim " + std::to_string(s.value) + " not divisible by blocksize " + std::to_string(b));
      out[d] = s.known() ? Dim(s.value / b) : Dim();
    }
  }
  ctx.SetOutput(0, ctx.InputDType(0), out);
  return Status::Ok();
}

// ---------------------------------------------------------------- TopK

Status CheckTopK(const Node& node, int opset) {
  if (opset < 10 && !node.attrs.Has("k"))
    return InvalidArgument(node.DebugName() + ": attribute 'k' is required before opset 10");
  if (opset >= 10 && node.attrs.Has("k"))
    return InvalidArgument(node.DebugName() + ": attribute 'k' became an input in opset 10");
  if (opset >= 10 && (node.inputs.size() < 2 || node.inputs[1] < 0))
    return InvalidArgument(node.DebugName() + ": input 'K' is required from opset 10");
  if (opset < 10 && node.inputs.size() > 1) return InvalidArgument(node.DebugName() + ": input 'K' needs opset 10");
  if (opset < 11 && (node.attrs.Has("largest") || node.attrs.Has("sorted")))
    return InvalidArgument(node.DebugName() + ": attributes largest/sorted need opset 11");
  WH_RETURN_IF_ERROR(CheckBool(node, "largest"));
  return CheckBool(node, "sorted");
}

Status InferTopK(InferContext& ctx) {
  const SymShape* in = ctx.InputShape(0);
  const DType dt = ctx.InputDType(0);
  if (!in) {
    ctx.SetOutput(0, dt, std::nullopt);
    ctx.SetOutput(1, DType::kInt64, std::nullopt);
    return Status::Ok();
  }
  auto a = NormalizeAxis(ctx.attrs().GetInt("axis", -1), static_cast<int64_t>(in->size()));
  if (!a.ok()) return ctx.Error(a.status().message());
  bool known = true;
  int64_t k = ctx.attrs().GetInt("k", 0);
  if (ctx.opset() >= 10) {
    if (ctx.InputDType(1) != DType::kInt64) return ctx.Error("K must be int64");
    WH_RETURN_IF_ERROR(ReadScalar(ctx, 1, "K", &known, &k));
  }
  const Dim& d = (*in)[static_cast<size_t>(*a)];
  if (known && (k < 0 || (d.known() && k > d.value)))
    return ctx.Error("k = " + std::to_string(k) + " must be in [0, " + (d.known() ? std::to_string(d.value) : "?") +
                     "]");
  SymShape out = *in;
  out[static_cast<size_t>(*a)] = known ? Dim(k) : Dim();
  ctx.SetOutput(0, dt, out);
  ctx.SetOutput(1, DType::kInt64, out);
  return Status::Ok();
}

// ---------------------------------------------------------------- NonZero

// Number of non-zero elements (NaN counts, -0.0 does not; 16-bit floats by their bits).
StatusOr<int64_t> CountNonZero(const InferContext& ctx, const Tensor& t) {
  const int64_t n = t.numel();
  int64_t count = 0;
  auto count_as = [&](auto zero) {
    using T = decltype(zero);
    const T* p = static_cast<const T*>(t.raw_data());
    for (int64_t i = 0; i < n; ++i) count += p[i] != zero;
  };
  switch (t.dtype()) {
    case DType::kFloat32: count_as(0.f); break;
    case DType::kFloat64: count_as(0.0); break;
    case DType::kFloat16:
    case DType::kBFloat16: {
      const uint16_t* p = static_cast<const uint16_t*>(t.raw_data());
      for (int64_t i = 0; i < n; ++i) count += (p[i] & 0x7fffu) != 0;
      break;
    }
    case DType::kBool: count_as(false); break;
    case DType::kInt8: count_as(int8_t{0}); break;
    case DType::kUInt8: count_as(uint8_t{0}); break;
    case DType::kInt16: count_as(int16_t{0}); break;
    case DType::kUInt16: count_as(uint16_t{0}); break;
    case DType::kInt32: count_as(int32_t{0}); break;
    case DType::kUInt32: count_as(uint32_t{0}); break;
    case DType::kInt64: count_as(int64_t{0}); break;
    case DType::kUInt64: count_as(uint64_t{0}); break;
    default: return ctx.Error(std::string("input type ") + DTypeName(t.dtype()) + " is not supported");
  }
  return count;
}

// Output [rank, count]: the count is known only with the input's value (always at run time).
// A scalar input gives [0, count], as the ONNX spec says (unlike numpy).
Status InferNonZero(InferContext& ctx) {
  const SymShape* in = ctx.InputShape(0);
  Dim count;
  if (const Tensor* t = ctx.InputValue(0)) {
    WH_ASSIGN_OR_RETURN(int64_t c, CountNonZero(ctx, *t));
    count = Dim(c);
  }
  ctx.SetOutput(0, DType::kInt64, SymShape{in ? Dim(static_cast<int64_t>(in->size())) : Dim(), count});
  return Status::Ok();
}

}  // namespace

void RegisterIndexOps(OpRegistry& r) {
  r.Register(OpDef{"", "Size", 1, 1, 1, 1, 1, {}, nullptr, InferSize});
  r.Register(OpDef{"", "GatherElements", 11, 2, 2, 1, 1, {{"axis", AttrType::kInt}}, nullptr, InferGatherElements});
  r.Register(OpDef{"",
                   "Trilu",
                   14,
                   1,
                   2,
                   1,
                   1,
                   {{"upper", AttrType::kInt}},
                   [](const Node& n, int) { return CheckBool(n, "upper"); },
                   InferTrilu});
  r.Register(OpDef{"",
                   "CumSum",
                   11,
                   2,
                   2,
                   1,
                   1,
                   {{"exclusive", AttrType::kInt}, {"reverse", AttrType::kInt}},
                   [](const Node& n, int) -> Status {
                     WH_RETURN_IF_ERROR(CheckBool(n, "exclusive"));
                     return CheckBool(n, "reverse");
                   },
                   InferCumSum});
  r.Register(
      OpDef{"", "EyeLike", 9, 1, 1, 1, 1, {{"dtype", AttrType::kInt}, {"k", AttrType::kInt}}, nullptr, InferEyeLike});
  r.Register(OpDef{"", "OneHot", 9, 3, 3, 1, 1, {{"axis", AttrType::kInt}}, nullptr, InferOneHot});
  r.Register(OpDef{"",
                   "DepthToSpace",
                   1,
                   1,
                   1,
                   1,
                   1,
                   {{"blocksize", AttrType::kInt, true}, {"mode", AttrType::kString}},
                   CheckBlocksize,
                   [](InferContext& c) { return InferSpaceDepth(c, true); }});
  OpDef s2d{"",
            "SpaceToDepth",
            1,
            1,
            1,
            1,
            1,
            {{"blocksize", AttrType::kInt, true}, {"mode", AttrType::kString}},
            CheckBlocksize,
            [](InferContext& c) { return InferSpaceDepth(c, false); }};
  s2d.max_opset = 28;  // 28: mode (DCR, the old order, by default; or CRD)
  r.Register(std::move(s2d));
  r.Register(
      OpDef{"",
            "TopK",
            1,
            1,
            2,
            2,
            2,
            {{"axis", AttrType::kInt}, {"k", AttrType::kInt}, {"largest", AttrType::kInt}, {"sorted", AttrType::kInt}},
            CheckTopK,
            InferTopK});
  r.Register(OpDef{"", "GatherND", 11, 2, 2, 1, 1, {{"batch_dims", AttrType::kInt}}, nullptr, InferGatherND});
  r.Register(OpDef{"", "Scatter", 9, 3, 3, 1, 1, {{"axis", AttrType::kInt}}, nullptr, InferScatterElements});
  r.Register(OpDef{"",
                   "ScatterElements",
                   11,
                   3,
                   3,
                   1,
                   1,
                   {{"axis", AttrType::kInt}, {"reduction", AttrType::kString}},
                   CheckScatter,
                   InferScatterElements});
  r.Register(OpDef{"", "ScatterND", 11, 3, 3, 1, 1, {{"reduction", AttrType::kString}}, CheckScatter, InferScatterND});
  r.Register(OpDef{"", "NonZero", 9, 1, 1, 1, 1, {}, nullptr, InferNonZero});
}

}  // namespace whittle
