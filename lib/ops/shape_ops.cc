// Shape-only ops: Flatten, Reshape, Squeeze, Unsqueeze, Identity, Dropout, Shape,
// Constant and ConstantOfShape. Their kernels move no bytes or only write constants, so what
// matters here is inference: symbolic dims (e.g. "batch") survive Flatten/Reshape/Squeeze
// whenever the arithmetic allows it, and element-count mismatches are caught before a kernel
// could alias a buffer with the wrong size.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "lib/ops/op_def.h"
#include "lib/ops/shape_helpers.h"

namespace whittle {
namespace {


// a * b, false on overflow.
bool MulOk(int64_t a, int64_t b, int64_t* r) { return !__builtin_mul_overflow(a, b, r); }

// Product of s[b, e): a known value when every dim is known, the single symbolic dim when the
// others multiply to 1 (Flatten of [batch,1,28,28] at axis 1 keeps "batch"), else unknown.
Dim DimProduct(const SymShape& s, size_t b, size_t e) {
  int64_t known = 1;
  int unknown = 0;
  const Dim* sym = nullptr;
  bool overflow = false;
  for (size_t i = b; i < e; ++i) {
    if (s[i].known()) {
      if (s[i].value == 0) return Dim(0);
      overflow |= !MulOk(known, s[i].value, &known);
    } else {
      ++unknown;
      sym = &s[i];
    }
  }
  if (overflow) return Dim();
  if (unknown == 0) return Dim(known);
  if (unknown == 1 && known == 1) return *sym;
  return Dim();
}

// Reads an int64 1-D tensor (shape, axes) when present and known; int32 is accepted too.
Status ReadIntVector(const InferContext& ctx, int i, const char* what, std::vector<int64_t>* out) {
  const Tensor* t = ctx.InputValue(i);
  if (t->dtype() != DType::kInt64 && t->dtype() != DType::kInt32)
    return ctx.Error(std::string(what) + " must be int64, got " + DTypeName(t->dtype()));
  if (t->rank() > 1) return ctx.Error(std::string(what) + " must be 1-D, got shape " + DimsToString(t->dims()));
  *out = ToInt64Vector(*t);
  return Status::Ok();
}

// ---------------------------------------------------------------- Flatten

Status InferFlatten(InferContext& ctx) {
  const DType dt = ctx.InputDType(0);
  const SymShape* in = ctx.InputShape(0);
  if (!in) {
    ctx.SetOutput(0, dt, SymShape{Dim(), Dim()});
    return Status::Ok();
  }
  const int64_t r = static_cast<int64_t>(in->size());
  int64_t axis = ctx.attrs().GetInt("axis", 1);
  if (axis < -r || axis > r)
    return ctx.Error("axis " + std::to_string(axis) + " is out of range [" + std::to_string(-r) + ", " +
                     std::to_string(r) + "] for an input of rank " + std::to_string(r));
  if (axis < 0) axis += r;
  const size_t a = static_cast<size_t>(axis);
  ctx.SetOutput(0, dt, SymShape{DimProduct(*in, 0, a), DimProduct(*in, a, in->size())});
  return Status::Ok();
}

// ---------------------------------------------------------------- Reshape

struct DimTally {
  int64_t known = 1;
  bool overflow = false;
  std::map<std::string, int> symbols;  // named symbolic dims with multiplicity
  int anonymous = 0;                   // unknown dims without a name
  void Add(const Dim& d) {
    if (d.known()) overflow |= !MulOk(known, d.value, &known);
    else if (!d.param.empty()) ++symbols[d.param];
    else ++anonymous;
  }
  bool fully_known() const { return anonymous == 0 && symbols.empty(); }
};

Status InferReshape(InferContext& ctx) {
  const DType dt = ctx.InputDType(0);
  // The requested shape: constant, or propagated from the input's own shape (lib/ops/
  // shape_values.h). req: the numbers; sym[i]: the symbol where entry i is only known by name
  // (the batch taken from Shape(x)); symbols stand for sizes, never for 0 or -1.
  std::vector<int64_t> req;
  std::vector<std::string> sym;
  if (ctx.InputValue(1)) {
    WH_RETURN_IF_ERROR(ReadIntVector(ctx, 1, "the shape input", &req));
    sym.assign(req.size(), std::string());
  } else if (ctx.InputSymValue(1)) {
    for (const SymInt& e : *ctx.InputSymValue(1)) {
      if (!e.known() && e.symbol.empty()) {
        // An unnamed unknown could be 0 or -1: only the rank is known.
        ctx.SetOutput(0, dt, SymShape(ctx.InputSymValue(1)->size(), Dim()));
        return Status::Ok();
      }
      req.push_back(e.known() ? *e.value : -2);  // -2: shown in messages for a symbol
      sym.push_back(e.symbol);
    }
  } else {
    const SymShape* ss = ctx.InputShape(1);
    if (ss && ss->size() == 1 && (*ss)[0].known()) {
      WH_ASSIGN_OR_RETURN(SymShape out, UnknownDimsOfRank(ctx, (*ss)[0].value));
      ctx.SetOutput(0, dt, std::move(out));
    } else {
      ctx.SetOutput(0, dt, std::nullopt);
    }
    return Status::Ok();
  }
  const bool allowzero = ctx.opset() >= 14 && ctx.attrs().GetInt("allowzero", 0) != 0;
  const SymShape* in = ctx.InputShape(0);
  SymShape out(req.size());
  int infer_at = -1;
  bool has_zero = false;
  for (size_t i = 0; i < req.size(); ++i) {
    const int64_t v = req[i];
    if (!sym[i].empty()) {
      out[i] = Dim::Symbol(sym[i]);
    } else if (v == -1) {
      if (infer_at >= 0) return ctx.Error("the shape input has more than one -1: " + DimsToString(req));
      infer_at = static_cast<int>(i);
    } else if (v < -1) {
      return ctx.Error("the shape input has an invalid dim " + std::to_string(v) + ": " + DimsToString(req));
    } else if (v == 0 && !allowzero) {
      if (!in) {
        out[i] = Dim();
      } else if (i >= in->size()) {
        return ctx.Error("shape[" + std::to_string(i) + "] = 0 copies input dim " + std::to_string(i) +
                         ", but the input has rank " + std::to_string(in->size()));
      } else {
        out[i] = (*in)[i];
      }
    } else {
      has_zero |= v == 0;
      out[i] = Dim(v);
    }
  }
  if (allowzero && has_zero && infer_at >= 0)
    return ctx.Error("with allowzero=1 the shape input may not contain both 0 and -1: " + DimsToString(req));
  if (!in) {
    if (infer_at >= 0) out[static_cast<size_t>(infer_at)] = Dim();
    ctx.SetOutput(0, dt, out);
    return Status::Ok();
  }
  DimTally tin, tout;
  for (const Dim& d : *in) tin.Add(d);
  for (size_t i = 0; i < out.size(); ++i)
    if (static_cast<int>(i) != infer_at) tout.Add(out[i]);
  if (tin.overflow || tout.overflow) return ctx.Error("element count overflows");
  // A symbol copied through (0 or an equal declared dim) cancels on both sides.
  for (auto it = tin.symbols.begin(); it != tin.symbols.end();) {
    auto jt = tout.symbols.find(it->first);
    if (jt != tout.symbols.end()) {
      const int m = std::min(it->second, jt->second);
      it->second -= m;
      jt->second -= m;
      if (jt->second == 0) tout.symbols.erase(jt);
    }
    it = it->second == 0 ? tin.symbols.erase(it) : std::next(it);
  }
  const std::string in_str = SymShapeToString(*in);
  if (tin.fully_known() && tout.fully_known()) {
    if (infer_at >= 0) {
      if (tout.known == 0)
        return ctx.Error("cannot infer the -1 in " + DimsToString(req) + " when the other dims multiply to 0 (input " +
                         in_str + ")");
      if (tin.known % tout.known != 0)
        return ctx.Error("cannot reshape input " + in_str + " to " + DimsToString(req) + ": element count " +
                         std::to_string(tin.known) + " is not a multiple of " + std::to_string(tout.known));
      out[static_cast<size_t>(infer_at)] = Dim(tin.known / tout.known);
    } else if (tin.known != tout.known) {
      return ctx.Error("cannot reshape input " + in_str + " (" + std::to_string(tin.known) + " elements) to " +
                       DimsToString(req) + " (" + std::to_string(tout.known) + " elements)");
    }
  } else if (infer_at >= 0) {
    // [batch,1,28,28] -> [-1,784]: the -1 is exactly the one leftover input symbol.
    const bool single = tin.anonymous == 0 && tin.symbols.size() == 1 && tin.symbols.begin()->second == 1 &&
                        tout.fully_known() && tin.known == tout.known;
    out[static_cast<size_t>(infer_at)] = single ? Dim::Symbol(tin.symbols.begin()->first) : Dim();
  }
  ctx.SetOutput(0, dt, out);
  return Status::Ok();
}

// ---------------------------------------------------------------- Squeeze / Unsqueeze

// Axes from the attribute (opset < 13) or input 1. *known is false when input 1 exists but its
// value is not known yet.
Status ReadAxes(const InferContext& ctx, bool* present, bool* known, std::vector<int64_t>* axes) {
  *present = false;
  *known = true;
  if (ctx.opset() < 13) {
    if (ctx.attrs().Has("axes")) {
      *present = true;
      *axes = ctx.attrs().GetInts("axes");
    }
    return Status::Ok();
  }
  if (!ctx.HasInput(1)) return Status::Ok();
  *present = true;
  if (!ctx.InputValue(1)) {
    *known = false;
    return Status::Ok();
  }
  return ReadIntVector(ctx, 1, "the axes input", axes);
}

Status NormalizeAxesList(const InferContext& ctx, std::vector<int64_t>* axes, int64_t rank) {
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t& a : *axes) {
    auto n = NormalizeAxis(a, rank, "axis");
    if (!n.ok()) return ctx.Error(n.status().message());
    if (seen[static_cast<size_t>(*n)]) return ctx.Error("axis " + std::to_string(a) + " is repeated");
    seen[static_cast<size_t>(*n)] = true;
    a = *n;
  }
  return Status::Ok();
}

Status InferSqueeze(InferContext& ctx) {
  const DType dt = ctx.InputDType(0);
  bool present, known;
  std::vector<int64_t> axes;
  WH_RETURN_IF_ERROR(ReadAxes(ctx, &present, &known, &axes));
  const SymShape* in = ctx.InputShape(0);
  if (!in || !known) {
    ctx.SetOutput(0, dt, std::nullopt);
    return Status::Ok();
  }
  SymShape out;
  if (present) {
    WH_RETURN_IF_ERROR(NormalizeAxesList(ctx, &axes, static_cast<int64_t>(in->size())));
    for (int64_t a : axes) {
      const Dim& d = (*in)[static_cast<size_t>(a)];
      if (d.known() && d.value != 1)
        return ctx.Error("cannot squeeze axis " + std::to_string(a) + " of size " + std::to_string(d.value) +
                         " (input shape " + SymShapeToString(*in) + ")");
    }
    for (size_t i = 0; i < in->size(); ++i)
      if (std::find(axes.begin(), axes.end(), static_cast<int64_t>(i)) == axes.end()) out.push_back((*in)[i]);
  } else {
    for (const Dim& d : *in) {
      if (!d.known()) {  // might be 1: the output rank is unknown
        ctx.SetOutput(0, dt, std::nullopt);
        return Status::Ok();
      }
      if (d.value != 1) out.push_back(d);
    }
  }
  ctx.SetOutput(0, dt, out);
  return Status::Ok();
}

Status InferUnsqueeze(InferContext& ctx) {
  const DType dt = ctx.InputDType(0);
  bool present, known;
  std::vector<int64_t> axes;
  WH_RETURN_IF_ERROR(ReadAxes(ctx, &present, &known, &axes));
  if (!present) return ctx.Error(ctx.opset() < 13 ? "attribute 'axes' is required" : "input 'axes' is required");
  const SymShape* in = ctx.InputShape(0);
  if (!in || !known) {
    ctx.SetOutput(0, dt, std::nullopt);
    return Status::Ok();
  }
  const int64_t out_rank = static_cast<int64_t>(in->size() + axes.size());
  WH_RETURN_IF_ERROR(NormalizeAxesList(ctx, &axes, out_rank));
  SymShape out;
  size_t next = 0;
  for (int64_t i = 0; i < out_rank; ++i) {
    if (std::find(axes.begin(), axes.end(), i) != axes.end()) out.push_back(Dim(1));
    else out.push_back((*in)[next++]);
  }
  ctx.SetOutput(0, dt, out);
  return Status::Ok();
}

Status CheckAxesForm(const Node& node, int opset) {
  if (opset >= 13 && node.attrs.Has("axes"))
    return InvalidArgument(node.DebugName() + ": attribute 'axes' was replaced by the 'axes' input in opset 13");
  if (opset < 13 && node.inputs.size() > 1 && node.inputs[1] >= 0)
    return InvalidArgument(node.DebugName() + ": the 'axes' input needs opset 13 (this model imports opset " +
                           std::to_string(opset) + "); use the 'axes' attribute");
  return Status::Ok();
}

// ---------------------------------------------------------------- Dropout

Status InferDropout(InferContext& ctx) {
  const DType dt = ctx.InputDType(0);
  const SymShape* in = ctx.InputShape(0);
  std::optional<SymShape> shape = in ? std::optional<SymShape>(*in) : std::nullopt;
  ctx.SetOutput(0, dt, shape);
  if (ctx.num_outputs() > 1) ctx.SetOutput(1, ctx.opset() >= 10 ? DType::kBool : dt, shape);
  float ratio = ctx.opset() < 12 ? ctx.attrs().GetFloat("ratio", 0.5f) : 0.5f;
  bool ratio_known = true;
  if (ctx.opset() >= 12 && ctx.HasInput(1)) {
    const Tensor* r = ctx.InputValue(1);
    ratio_known = r != nullptr;
    if (r) {
      if (r->numel() != 1) return ctx.Error("ratio must be a scalar, got shape " + DimsToString(r->dims()));
      if (r->dtype() == DType::kFloat32) ratio = r->data<float>()[0];
      else if (r->dtype() == DType::kFloat64) ratio = static_cast<float>(r->data<double>()[0]);
      else ratio_known = false;  // float16 ratio: only matters in training mode
    }
  }
  if (ratio_known && !(ratio >= 0.f && ratio < 1.f))
    return ctx.Error("ratio must be in [0, 1), got " + std::to_string(ratio));
  // Training (a true training_mode, opset 12+) draws a random mask; the kernels do it
  // (kernels/common/dropout.h). Only the type is checked here.
  if (ctx.opset() >= 12 && ctx.HasInput(2) && ctx.InputDType(2) != DType::kUndefined && ctx.InputDType(2) != DType::kBool)
    return ctx.Error(std::string("training_mode must be bool, got ") + DTypeName(ctx.InputDType(2)));
  const Tensor* training = ctx.InputValue(2);
  if (training && (training->dtype() != DType::kBool || training->numel() != 1))
    return ctx.Error("training_mode must be a bool scalar");
  return Status::Ok();
}

Status CheckDropout(const Node& node, int opset) {
  if (opset >= 12 && node.attrs.Has("ratio"))
    return InvalidArgument(node.DebugName() + ": attribute 'ratio' was replaced by the 'ratio' input in opset 12");
  if (opset < 12 && node.inputs.size() > 1)
    return InvalidArgument(node.DebugName() + ": inputs 'ratio' and 'training_mode' need opset 12");
  if (opset < 12 && node.attrs.Has("seed"))
    return InvalidArgument(node.DebugName() + ": attribute 'seed' needs opset 12");
  return Status::Ok();
}

// ---------------------------------------------------------------- Shape

Status InferShape(InferContext& ctx) {
  const SymShape* in = ctx.InputShape(0);
  if (!in) {
    ctx.SetOutput(0, DType::kInt64, SymShape{Dim()});
    return Status::Ok();
  }
  const int64_t r = static_cast<int64_t>(in->size());
  int64_t start = ctx.attrs().GetInt("start", 0), end = ctx.attrs().GetInt("end", r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, 0, r);
  ctx.SetOutput(0, DType::kInt64, SymShape{Dim(std::max<int64_t>(0, end - start))});
  return Status::Ok();
}

Status CheckShape(const Node& node, int opset) {
  if (opset < 15 && (node.attrs.Has("start") || node.attrs.Has("end")))
    return InvalidArgument(node.DebugName() + ": attributes 'start' and 'end' need opset 15");
  return Status::Ok();
}

// ---------------------------------------------------------------- Constant / ConstantOfShape

Status CheckConstant(const Node& node, int) {
  int n = 0;
  for (const char* a : {"value", "value_float", "value_floats", "value_int", "value_ints", "value_string",
                        "value_strings"})
    n += node.attrs.Has(a);
  if (n != 1)
    return InvalidArgument(node.DebugName() + ": exactly one of the value* attributes must be set, got " +
                           std::to_string(n));
  if (node.attrs.Has("value_string") || node.attrs.Has("value_strings"))
    return Unimplemented(node.DebugName() + ": string constants are not supported (tensors hold numbers only)");
  return Status::Ok();
}

Status InferConstant(InferContext& ctx) {
  const AttributeMap& a = ctx.attrs();
  if (const Tensor* t = a.GetTensor("value")) {
    if (!t->defined()) return ctx.Error("attribute 'value' holds no tensor data");
    ctx.SetOutput(0, t->dtype(), ToSymShape(t->dims()));
  } else if (a.Has("value_float")) {
    ctx.SetOutput(0, DType::kFloat32, SymShape{});
  } else if (a.Has("value_floats")) {
    ctx.SetOutput(0, DType::kFloat32, SymShape{Dim(static_cast<int64_t>(a.GetFloats("value_floats").size()))});
  } else if (a.Has("value_int")) {
    ctx.SetOutput(0, DType::kInt64, SymShape{});
  } else if (a.Has("value_ints")) {
    ctx.SetOutput(0, DType::kInt64, SymShape{Dim(static_cast<int64_t>(a.GetInts("value_ints").size()))});
  } else {
    return Unimplemented(ctx.node().DebugName() + ": no supported value attribute");
  }
  return Status::Ok();
}

Status CheckConstantOfShape(const Node& node, int) {
  const Tensor* v = node.attrs.GetTensor("value");
  if (v && (!v->defined() || v->numel() != 1))
    return InvalidArgument(node.DebugName() + ": attribute 'value' must hold exactly one element");
  return Status::Ok();
}

Status InferConstantOfShape(InferContext& ctx) {
  const Tensor* v = ctx.attrs().GetTensor("value");
  const DType dt = v ? v->dtype() : DType::kFloat32;
  if (ctx.InputDType(0) != DType::kInt64)
    return ctx.Error(std::string("input must be int64, got ") + DTypeName(ctx.InputDType(0)));
  if (ctx.InputValue(0)) {
    std::vector<int64_t> dims;
    WH_RETURN_IF_ERROR(ReadIntVector(ctx, 0, "the shape input", &dims));
    for (int64_t d : dims)
      if (d < 0) return ctx.Error("the shape input has a negative dim: " + DimsToString(dims));
    ctx.SetOutput(0, dt, ToSymShape(dims));
    return Status::Ok();
  }
  const SymShape* ss = ctx.InputShape(0);
  if (ss && ss->size() == 1 && (*ss)[0].known()) {
    WH_ASSIGN_OR_RETURN(SymShape out, UnknownDimsOfRank(ctx, (*ss)[0].value));
    ctx.SetOutput(0, dt, std::move(out));
  } else {
    ctx.SetOutput(0, dt, std::nullopt);
  }
  return Status::Ok();
}

}  // namespace

void RegisterShapeOps(OpRegistry& r) {
  r.Register(OpDef{"", "Flatten", 1, 1, 1, 1, 1, {{"axis", AttrType::kInt}}, nullptr, InferFlatten});
  r.Register(OpDef{"", "Reshape", 5, 2, 2, 1, 1, {{"allowzero", AttrType::kInt}},
                   [](const Node& n, int opset) -> Status {
                     if (opset < 14 && n.attrs.Has("allowzero"))
                       return InvalidArgument(n.DebugName() + ": attribute 'allowzero' needs opset 14");
                     return Status::Ok();
                   },
                   InferReshape});
  r.Register(OpDef{"", "Squeeze", 1, 1, 2, 1, 1, {{"axes", AttrType::kInts}}, CheckAxesForm, InferSqueeze});
  r.Register(OpDef{"", "Unsqueeze", 1, 1, 2, 1, 1, {{"axes", AttrType::kInts}}, CheckAxesForm, InferUnsqueeze});
  OpDef identity{"", "Identity", 1, 1, 1, 1, 1, {}, nullptr, [](InferContext& ctx) {
                   ctx.SetOutputKind(0, ctx.InputKind(0));  // a sequence or an optional passes too
                   return InferSameAsInput0(ctx);
                 }};
  identity.any_kind = true;
  r.Register(std::move(identity));
  r.Register(OpDef{"", "Dropout", 7, 1, 3, 1, 2, {{"ratio", AttrType::kFloat}, {"seed", AttrType::kInt}},
                   CheckDropout, InferDropout});
  r.Register(OpDef{"", "Shape", 1, 1, 1, 1, 1, {{"start", AttrType::kInt}, {"end", AttrType::kInt}}, CheckShape,
                   InferShape});
  r.Register(OpDef{"", "Constant", 1, 0, 0, 1, 1,
                   {{"value", AttrType::kTensor},
                    {"value_float", AttrType::kFloat},
                    {"value_floats", AttrType::kFloats},
                    {"value_int", AttrType::kInt},
                    {"value_ints", AttrType::kInts},
                    {"value_string", AttrType::kString},
                    {"value_strings", AttrType::kStrings}},
                   CheckConstant, InferConstant});
  r.Register(OpDef{"", "ConstantOfShape", 9, 1, 1, 1, 1, {{"value", AttrType::kTensor}}, CheckConstantOfShape,
                   InferConstantOfShape});
}

}  // namespace whittle
