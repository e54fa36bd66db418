// OpDefs for Conv and ConvTranspose (opsets 1/11: output_padding, output_shape, auto_pad), plus the sliding-window attribute checks and output-size inference that the
// pools and the integer convs share (declared in lib/ops/window.h). Sizes follow ONNX 1.12:
// explicit pads, auto_pad SAME_UPPER/SAME_LOWER/VALID, dilations, ceil_mode (pools). The kernels recompute the same geometry (kernels/reference/conv.h).
#include <limits>
#include <cstdint>
#include <string>
#include <vector>

#include "lib/ops/op_def.h"
#include "lib/ops/shape_helpers.h"
#include "lib/ops/window.h"

namespace whittle {
namespace {

std::string Str(int64_t v) { return std::to_string(v); }

Status CheckLen(const Node& node, const char* name, size_t got, size_t want) {
  if (got != 0 && got != want)
    return InvalidArgument(node.DebugName() + ": " + name + " has " + Str(static_cast<int64_t>(got)) +
                           " values, expected " + Str(static_cast<int64_t>(want)));
  return Status::Ok();
}

Status CheckFlag(const Node& node, const char* name) {
  const int64_t v = node.attrs.GetInt(name, 0);
  if (v != 0 && v != 1) return InvalidArgument(node.DebugName() + ": " + name + " must be 0 or 1, got " + Str(v));
  return Status::Ok();
}

}  // namespace

// Value and length checks of kernel_shape, strides, dilations, pads and auto_pad (and the 0/1
// flags of the pools). Rank-dependent checks happen in InferWindowOutput.
Status CheckWindowAttributes(const Node& node) {
  const std::string ap = node.attrs.GetString("auto_pad", "NOTSET");
  if (ap != "NOTSET" && ap != "SAME_UPPER" && ap != "SAME_LOWER" && ap != "VALID" && !ap.empty())
    return InvalidArgument(node.DebugName() + ": auto_pad '" + ap +
                           "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
  const auto ks = node.attrs.GetInts("kernel_shape"), st = node.attrs.GetInts("strides");
  const auto dl = node.attrs.GetInts("dilations"), pd = node.attrs.GetInts("pads");
  for (int64_t v : ks)
    if (v <= 0) return InvalidArgument(node.DebugName() + ": kernel_shape values must be > 0, got " + Str(v));
  for (int64_t v : st)
    if (v <= 0) return InvalidArgument(node.DebugName() + ": strides must be > 0, got " + Str(v));
  for (int64_t v : dl)
    if (v <= 0) return InvalidArgument(node.DebugName() + ": dilations must be > 0, got " + Str(v));
  for (int64_t v : pd)
    if (v < 0) return InvalidArgument(node.DebugName() + ": pads must be >= 0, got " + Str(v));
  if (pd.size() % 2 != 0)
    return InvalidArgument(node.DebugName() + ": pads must have 2 values per spatial dim, got " +
                           Str(static_cast<int64_t>(pd.size())));
  if (node.attrs.Has("kernel_shape") && ks.empty())
    return InvalidArgument(node.DebugName() + ": kernel_shape must not be empty");
  size_t n = ks.size();
  if (n == 0) n = !st.empty() ? st.size() : !dl.empty() ? dl.size() : pd.size() / 2;
  WH_RETURN_IF_ERROR(CheckLen(node, "strides", st.size(), n));
  WH_RETURN_IF_ERROR(CheckLen(node, "dilations", dl.size(), n));
  WH_RETURN_IF_ERROR(CheckLen(node, "pads", pd.size(), 2 * n));
  for (const char* flag : {"ceil_mode", "count_include_pad", "storage_order"})
    if (node.attrs.Has(flag)) WH_RETURN_IF_ERROR(CheckFlag(node, flag));
  return Status::Ok();
}

// Output spatial dims for input spatial dims `in` and kernel dims `kernel` (-1: unknown).
Status InferWindowOutput(const InferContext& ctx, const SymShape& in, const std::vector<int64_t>& kernel,
                         SymShape* out) {
  const AttributeMap& a = ctx.attrs();
  const size_t n = in.size();
  const auto st = a.GetInts("strides"), dl = a.GetInts("dilations"), pd = a.GetInts("pads");
  const auto ks = a.GetInts("kernel_shape");
  if (!ks.empty() && ks.size() != n)
    return ctx.Error("kernel_shape has " + Str(static_cast<int64_t>(ks.size())) + " values for an input with " +
                     Str(static_cast<int64_t>(n)) + " spatial dims");
  if (!st.empty() && st.size() != n)
    return ctx.Error("strides has " + Str(static_cast<int64_t>(st.size())) + " values, expected " +
                     Str(static_cast<int64_t>(n)));
  if (!dl.empty() && dl.size() != n)
    return ctx.Error("dilations has " + Str(static_cast<int64_t>(dl.size())) + " values, expected " +
                     Str(static_cast<int64_t>(n)));
  if (!pd.empty() && pd.size() != 2 * n)
    return ctx.Error("pads has " + Str(static_cast<int64_t>(pd.size())) + " values, expected " +
                     Str(static_cast<int64_t>(2 * n)));
  const std::string ap = a.GetString("auto_pad", "NOTSET");
  const bool ceil_mode = a.GetInt("ceil_mode", 0) != 0;
  out->assign(n, Dim());
  for (size_t i = 0; i < n; ++i) {
    const int64_t s = st.empty() ? 1 : st[i], d = dl.empty() ? 1 : dl[i];
    if (!in[i].known()) continue;
    const int64_t x = in[i].value;
    // Checked: hostile pads, strides or dilations (2^40) must not wrap the arithmetic.
    const auto overflow = [&] {
      return ctx.Error("window arithmetic of spatial dim " + Str(static_cast<int64_t>(i)) + " overflows (size " + Str(x) +
                       ", kernel " + Str(kernel[i]) + ", stride " + Str(s) + ", dilation " + Str(d) + ", pads " +
                       (pd.empty() ? std::string("none") : Str(pd[i]) + "+" + Str(pd[i + n])) + ")");
    };
    if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
      int64_t up = 0;
      if (__builtin_add_overflow(x, s - 1, &up)) return overflow();
      (*out)[i] = Dim(up / s);
      continue;
    }
    if (kernel[i] < 0) continue;
    int64_t eff = 0, pads = 0, span = 0;
    if (__builtin_mul_overflow(kernel[i] - 1, d, &eff) || __builtin_add_overflow(eff, 1, &eff)) return overflow();
    if (ap != "VALID" && !pd.empty() && __builtin_add_overflow(pd[i], pd[i + n], &pads)) return overflow();
    if (__builtin_add_overflow(x, pads, &span) || __builtin_sub_overflow(span, eff, &span)) return overflow();
    if (ceil_mode && span > INT64_MAX - s) return overflow();
    if (span < 0)
      return ctx.Error("window of extent " + Str(eff) + " does not fit spatial dim " + Str(static_cast<int64_t>(i)) +
                       " of size " + Str(x) + " with total padding " + Str(pads));
    (*out)[i] = Dim((ceil_mode ? (span + s - 1) / s : span / s) + 1);
  }
  return Status::Ok();
}

StatusOr<std::optional<SymShape>> InferConvOutput(const InferContext& ctx, int xi, int wi) {
  const SymShape* x = ctx.InputShape(xi);
  const SymShape* w = ctx.InputShape(wi);
  if (x && x->size() < 3) return ctx.Error("X must have rank >= 3 (N, C, spatial...), got " + SymShapeToString(*x));
  if (x && w && w->size() != x->size())
    return ctx.Error("W " + SymShapeToString(*w) + " must have the rank of X " + SymShapeToString(*x));
  if (!x && w && w->size() < 3) return ctx.Error("W must have rank >= 3, got " + SymShapeToString(*w));
  const int64_t group = ctx.attrs().GetInt("group", 1);
  Dim m;
  if (w) {
    m = (*w)[0];
    if (m.known() && m.value % group != 0)
      return ctx.Error("group " + Str(group) + " does not divide the " + Str(m.value) + " output channels of W");
    int64_t expect = 0;
    if ((*w)[1].known() && __builtin_mul_overflow((*w)[1].value, group, &expect))
      return ctx.Error("W's " + Str((*w)[1].value) + " channels times group " + Str(group) + " pass 2^63");
    if (x && (*x)[1].known() && (*w)[1].known() && (*x)[1].value != expect)
      return ctx.Error("X has " + Str((*x)[1].value) + " channels but W " + SymShapeToString(*w) + " with group " +
                       Str(group) + " expects " + Str(expect));
  }
  if (!x) return std::optional<SymShape>();
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

namespace {

Status CheckConv(const Node& node, int) {
  WH_RETURN_IF_ERROR(CheckWindowAttributes(node));
  const int64_t group = node.attrs.GetInt("group", 1);
  if (group < 1) return InvalidArgument(node.DebugName() + ": group must be >= 1, got " + Str(group));
  return Status::Ok();
}

Status InferConv(InferContext& ctx) {
  const DType dt = ctx.InputDType(0);
  if (ctx.InputDType(1) != DType::kUndefined && dt != DType::kUndefined && ctx.InputDType(1) != dt)
    return ctx.Error(std::string("W is ") + DTypeName(ctx.InputDType(1)) + " but X is " + DTypeName(dt));
  WH_ASSIGN_OR_RETURN(std::optional<SymShape> out, InferConvOutput(ctx, 0, 1));
  const SymShape* w = ctx.InputShape(1);
  if (ctx.HasInput(2) && w) {
    const Dim m = (*w)[0];
    const SymShape* b = ctx.InputShape(2);
    if (b && b->size() != 1) return ctx.Error("B must be 1-D, got " + SymShapeToString(*b));
    if (b && (*b)[0].known() && m.known() && (*b)[0].value != m.value)
      return ctx.Error("B " + SymShapeToString(*b) + " must have one value per output channel (" + Str(m.value) + ")");
  }
  ctx.SetOutput(0, dt, out);
  return Status::Ok();
}

Status CheckConvTranspose(const Node& node, int) {
  WH_RETURN_IF_ERROR(CheckWindowAttributes(node));
  const int64_t group = node.attrs.GetInt("group", 1);
  if (group < 1) return InvalidArgument(node.DebugName() + ": group must be >= 1, got " + Str(group));
  for (int64_t v : node.attrs.GetInts("output_padding"))
    if (v < 0) return InvalidArgument(node.DebugName() + ": output_padding must be >= 0, got " + Str(v));
  for (int64_t v : node.attrs.GetInts("output_shape"))
    if (v <= 0) return InvalidArgument(node.DebugName() + ": output_shape values must be > 0, got " + Str(v));
  return Status::Ok();
}

// X [N, C, D...], W [C, M/group, k...], optional B [M] -> Y [N, M, O...] with
// O = stride*(D-1) + output_padding + (k-1)*dilation + 1 - pads, or output_shape when given, or
// D*stride for SAME_UPPER/SAME_LOWER.
Status InferConvTranspose(InferContext& ctx) {
  const DType dt = ctx.InputDType(0);
  WH_RETURN_IF_ERROR(CheckInputsMatchX(ctx, 1, 2));
  const SymShape* x = ctx.InputShape(0);
  const SymShape* w = ctx.InputShape(1);
  const AttributeMap& a = ctx.attrs();
  const int64_t group = a.GetInt("group", 1);
  if (x && x->size() < 3) return ctx.Error("X must have rank >= 3 (N, C, spatial...), got " + SymShapeToString(*x));
  if (w && w->size() < 3) return ctx.Error("W must have rank >= 3 (C, M/group, k...), got " + SymShapeToString(*w));
  if (x && w && w->size() != x->size())
    return ctx.Error("W " + SymShapeToString(*w) + " must have the rank of X " + SymShapeToString(*x));
  Dim m;
  if (w) {
    if ((*w)[0].known() && (*w)[0].value % group != 0)
      return ctx.Error("group " + Str(group) + " does not divide the " + Str((*w)[0].value) + " input channels of W");
    if (x && (*x)[1].known() && (*w)[0].known() && (*x)[1].value != (*w)[0].value)
      return ctx.Error("X has " + Str((*x)[1].value) + " channels but W " + SymShapeToString(*w) + " expects " +
                       Str((*w)[0].value));
    int64_t channels = 0;
    if ((*w)[1].known() && __builtin_mul_overflow((*w)[1].value, group, &channels))
      return ctx.Error("W's " + Str((*w)[1].value) + " output channels per group times group " + Str(group) +
                       " pass 2^63");
    if ((*w)[1].known()) m = Dim(channels);
  }
  if (ctx.HasInput(2)) {
    const SymShape* b = ctx.InputShape(2);
    if (b && b->size() != 1) return ctx.Error("B must be 1-D, got " + SymShapeToString(*b));
    if (b && (*b)[0].known() && m.known() && (*b)[0].value != m.value)
      return ctx.Error("B " + SymShapeToString(*b) + " must have one value per output channel (" + Str(m.value) + ")");
  }
  if (!x) {
    ctx.SetOutput(0, dt, std::nullopt);
    return Status::Ok();
  }
  const size_t n = x->size() - 2;
  const auto ks = a.GetInts("kernel_shape"), st = a.GetInts("strides"), dl = a.GetInts("dilations");
  const auto pd = a.GetInts("pads"), op = a.GetInts("output_padding"), os = a.GetInts("output_shape");
  auto bad_len = [&](const char* name, size_t got, size_t want) {
    return ctx.Error(std::string(name) + " has " + Str(static_cast<int64_t>(got)) + " values, expected " +
                     Str(static_cast<int64_t>(want)));
  };
  if (!ks.empty() && ks.size() != n) return bad_len("kernel_shape", ks.size(), n);
  if (!st.empty() && st.size() != n) return bad_len("strides", st.size(), n);
  if (!dl.empty() && dl.size() != n) return bad_len("dilations", dl.size(), n);
  if (!pd.empty() && pd.size() != 2 * n) return bad_len("pads", pd.size(), 2 * n);
  if (!op.empty() && op.size() != n) return bad_len("output_padding", op.size(), n);
  if (!os.empty() && os.size() != n && os.size() != n + 2) return bad_len("output_shape", os.size(), n);
  const std::string ap = a.GetString("auto_pad", "NOTSET");
  SymShape out{(*x)[0], m};
  for (size_t i = 0; i < n; ++i) {
    int64_t k = i < ks.size() ? ks[i] : -1;
    if (w && (*w)[i + 2].known()) {
      if (k >= 0 && k != (*w)[i + 2].value) return ctx.Error("kernel_shape does not match W " + SymShapeToString(*w));
      k = (*w)[i + 2].value;
    }
    if (!os.empty()) {
      out.push_back(Dim(os[os.size() - n + i]));
      continue;
    }
    const Dim in = (*x)[i + 2];
    const int64_t s = st.empty() ? 1 : st[i];
    if (!in.known()) {
      out.push_back(Dim());
      continue;
    }
    if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
      int64_t o = 0;
      if (__builtin_mul_overflow(in.value, s, &o)) return ctx.Error("input dim " + Str(in.value) + " times stride " +
                                                                     Str(s) + " passes 2^63");
      out.push_back(Dim(o));
      continue;
    }
    if (k < 0) {
      out.push_back(Dim());
      continue;
    }
    const int64_t d = dl.empty() ? 1 : dl[i], o = op.empty() ? 0 : op[i];
    // In 128 bits: strides, dilations, pads and output_padding come from the model.
    using Wide = __int128;
    const Wide pads = (ap == "VALID" || pd.empty()) ? 0 : Wide(pd[i]) + pd[i + n];
    const Wide size = Wide(s) * (in.value - 1) + o + Wide(k - 1) * d + 1 - pads;
    if (size > std::numeric_limits<int64_t>::max())
      return ctx.Error("output spatial dim " + Str(static_cast<int64_t>(i)) + " passes 2^63");
    if (size <= 0)
      return ctx.Error("output spatial dim " + Str(static_cast<int64_t>(i)) + " would be " +
                       Str(static_cast<int64_t>(size < std::numeric_limits<int64_t>::min() ? std::numeric_limits<int64_t>::min() : size)) +
                       " (pads too large for the input)");
    out.push_back(Dim(static_cast<int64_t>(size)));
  }
  ctx.SetOutput(0, dt, out);
  return Status::Ok();
}

}  // namespace

void RegisterConvOps(OpRegistry& r) {
  OpDef conv;
  conv.op_type = "Conv";
  conv.min_inputs = 2;
  conv.max_inputs = 3;
  conv.attrs = {{"auto_pad", AttrType::kString}, {"dilations", AttrType::kInts}, {"group", AttrType::kInt},
                {"kernel_shape", AttrType::kInts}, {"pads", AttrType::kInts}, {"strides", AttrType::kInts}};
  conv.check = CheckConv;
  conv.infer = InferConv;
  r.Register(std::move(conv));

  OpDef ct;
  ct.op_type = "ConvTranspose";
  ct.min_inputs = 2;
  ct.max_inputs = 3;
  ct.attrs = {{"auto_pad", AttrType::kString},       {"dilations", AttrType::kInts},
              {"group", AttrType::kInt},             {"kernel_shape", AttrType::kInts},
              {"output_padding", AttrType::kInts},   {"output_shape", AttrType::kInts},
              {"pads", AttrType::kInts},             {"strides", AttrType::kInts}};
  ct.check = CheckConvTranspose;
  ct.infer = InferConvTranspose;
  r.Register(std::move(ct));
}

}  // namespace whittle
