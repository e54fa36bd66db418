// Resampling ops: Resize (opsets 10, 11, 13, 18, 19) and Upsample (opsets 7 and 9; deprecated
// from opset 10, where Resize replaces it). Attribute checks follow the opset each attribute or
// mode appeared in (or left in): tf_half_pixel_for_nn exists in opsets 11-12 only, antialias,
// axes and keep_aspect_ratio_policy from 18, half_pixel_symmetric from 19.
// Output dims: floor(input_dim * scale) when scales are given (computed in double, as the ONNX
// reference does; roi does not shrink the output), sizes[i] when sizes are given, or the sizes
// adjusted by keep_aspect_ratio_policy. When scales/sizes are not known yet the resized dims are
// unknown; at run time every value is known and the shape is concrete.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "lib/ops/op_def.h"
#include "lib/ops/shape_helpers.h"

namespace whittle {
namespace {

Status Bad(const Node& node, const std::string& what) { return InvalidArgument(node.DebugName() + ": " + what); }

bool OneOf(const std::string& s, std::initializer_list<const char*> options) {
  for (const char* o : options)
    if (s == o) return true;
  return false;
}

Status CheckBoolAttr(const Node& node, const char* name) {
  const int64_t v = node.attrs.GetInt(name, 0);
  if (v != 0 && v != 1) return Bad(node, std::string(name) + " must be 0 or 1, got " + std::to_string(v));
  return Status::Ok();
}

bool InputGiven(const Node& node, size_t i) { return i < node.inputs.size() && node.inputs[i] >= 0; }

// ---------------------------------------------------------------- checks

Status CheckResize(const Node& node, int opset) {
  const std::string mode = node.attrs.GetString("mode", "nearest");
  if (opset < 11) {
    if (mode != "nearest" && mode != "linear")
      return Bad(node, "mode must be nearest or linear in opset 10, got '" + mode + "'");
    for (const auto& [name, attr] : node.attrs.all())
      if (name != "mode") return Bad(node, "attribute '" + name + "' needs opset 11");
    if (node.inputs.size() != 2 || !InputGiven(node, 1))
      return Bad(node, "Resize-10 takes exactly two inputs (X, scales), got " + std::to_string(node.inputs.size()));
    return Status::Ok();
  }
  if (!OneOf(mode, {"nearest", "linear", "cubic"}))
    return Bad(node, "mode must be nearest, linear or cubic, got '" + mode + "'");
  const std::string ctm = node.attrs.GetString("coordinate_transformation_mode", "half_pixel");
  if (ctm == "tf_half_pixel_for_nn") {
    if (opset >= 13) return Bad(node, "coordinate_transformation_mode 'tf_half_pixel_for_nn' was removed in opset 13");
  } else if (ctm == "half_pixel_symmetric") {
    if (opset < 19) return Bad(node, "coordinate_transformation_mode 'half_pixel_symmetric' needs opset 19");
  } else if (!OneOf(ctm, {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_crop_and_resize"})) {
    return Bad(node, "unknown coordinate_transformation_mode '" + ctm + "'");
  }
  const std::string nm = node.attrs.GetString("nearest_mode", "round_prefer_floor");
  if (!OneOf(nm, {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}))
    return Bad(node, "nearest_mode must be round_prefer_floor, round_prefer_ceil, floor or ceil, got '" + nm + "'");
  WH_RETURN_IF_ERROR(CheckBoolAttr(node, "exclude_outside"));
  if (opset < 18) {
    for (const char* a : {"antialias", "axes", "keep_aspect_ratio_policy"})
      if (node.attrs.Has(a)) return Bad(node, std::string("attribute '") + a + "' needs opset 18");
  }
  WH_RETURN_IF_ERROR(CheckBoolAttr(node, "antialias"));
  const std::string policy = node.attrs.GetString("keep_aspect_ratio_policy", "stretch");
  if (!OneOf(policy, {"stretch", "not_larger", "not_smaller"}))
    return Bad(node, "keep_aspect_ratio_policy must be stretch, not_larger or not_smaller, got '" + policy + "'");
  if (opset < 13 && (!InputGiven(node, 1) || !InputGiven(node, 2)))
    return Bad(node, "inputs 'roi' and 'scales' are required before opset 13 (they may be empty tensors)");
  return Status::Ok();
}

Status CheckUpsample(const Node& node, int opset) {
  if (opset >= 10) return Bad(node, "Upsample is deprecated from opset 10; use Resize");
  const std::string mode = node.attrs.GetString("mode", "nearest");
  if (mode != "nearest" && mode != "linear") return Bad(node, "mode must be nearest or linear, got '" + mode + "'");
  if (opset < 9) {
    if (!node.attrs.Has("scales")) return Bad(node, "attribute 'scales' is required in opset 7");
    if (node.inputs.size() != 1) return Bad(node, "the 'scales' input needs opset 9; opset 7 takes the attribute");
    for (float s : node.attrs.GetFloats("scales"))
      if (!(s >= 1.f)) return Bad(node, "scales must be >= 1, got " + std::to_string(s));
  } else {
    if (node.attrs.Has("scales")) return Bad(node, "attribute 'scales' became an input in opset 9");
    if (node.inputs.size() != 2 || !InputGiven(node, 1))
      return Bad(node, "Upsample-9 takes exactly two inputs (X, scales)");
  }
  return Status::Ok();
}

// ---------------------------------------------------------------- shape inference

// True when input i is absent or known to be an empty tensor ("not given" in Resize's terms).
bool AbsentOrEmpty(const InferContext& ctx, int i) {
  if (!ctx.HasInput(i)) return true;
  if (const Tensor* t = ctx.InputValue(i)) return t->numel() == 0;
  const SymShape* s = ctx.InputShape(i);
  if (!s) return false;
  for (const Dim& d : *s)
    if (d.known() && d.value == 0) return true;
  return false;
}

// Output dims from a full-rank list of scales (double, as the ONNX reference computes them).
Status OutputFromScales(const InferContext& ctx, const SymShape& in, const std::vector<double>& scales, SymShape* out) {
  *out = in;
  for (size_t d = 0; d < in.size(); ++d) {
    if (!(scales[d] > 0.0) || !std::isfinite(scales[d]))
      return ctx.Error("scales must be finite and > 0, got " + std::to_string(scales[d]) + " for axis " +
                       std::to_string(d));
    if (scales[d] == 1.0) continue;
    if (!in[d].known()) {
      (*out)[d] = Dim();
      continue;
    }
    const double v = std::floor(static_cast<double>(in[d].value) * scales[d]);
    if (!(v < 4.0e18))
      return ctx.Error("scale " + std::to_string(scales[d]) + " makes axis " + std::to_string(d) + " too large");
    (*out)[d] = Dim(static_cast<int64_t>(v));
  }
  return Status::Ok();
}

// Scale values (float32 input or attribute), one per axis listed in axes, spread to full rank.
Status ReadScales(const InferContext& ctx, const Tensor& t, const std::vector<int64_t>& axes, size_t rank,
                  std::vector<double>* full) {
  if (t.dtype() != DType::kFloat32) return ctx.Error(std::string("scales must be float, got ") + DTypeName(t.dtype()));
  if (t.numel() != static_cast<int64_t>(axes.size()))
    return ctx.Error("scales has " + std::to_string(t.numel()) + " values, expected " + std::to_string(axes.size()) +
                     " (one per resized axis)");
  full->assign(rank, 1.0);
  for (size_t i = 0; i < axes.size(); ++i) (*full)[static_cast<size_t>(axes[i])] = t.data<float>()[i];
  return Status::Ok();
}

// X's shape, or null after setting Y to X's dtype with an unknown rank.
const SymShape* InputShapeOrUnknownOutput(InferContext& ctx) {
  const SymShape* in = ctx.InputShape(0);
  if (!in) ctx.SetOutput(0, ctx.InputDType(0), std::nullopt);
  return in;
}

Status InferResize(InferContext& ctx) {
  const DType dt = ctx.InputDType(0);
  const SymShape* in = InputShapeOrUnknownOutput(ctx);
  if (!in) return Status::Ok();
  const size_t r = in->size();
  if (r == 0) return ctx.Error("X must have rank >= 1");
  // Resized axes: the 'axes' attribute (opset 18) or every axis.
  std::vector<int64_t> axes;
  if (ctx.attrs().Has("axes")) {
    std::vector<bool> seen(r, false);
    for (int64_t a : ctx.attrs().GetInts("axes")) {
      auto n = NormalizeAxis(a, static_cast<int64_t>(r), "axes entry");
      if (!n.ok()) return ctx.Error(n.status().message());
      if (seen[static_cast<size_t>(*n)])
        return ctx.Error("axes " + DimsToString(ctx.attrs().GetInts("axes")) + " repeats an axis");
      seen[static_cast<size_t>(*n)] = true;
      axes.push_back(*n);
    }
  } else {
    for (size_t d = 0; d < r; ++d) axes.push_back(static_cast<int64_t>(d));
  }
  const int scales_i = ctx.opset() < 11 ? 1 : 2, sizes_i = 3;
  if (ctx.HasInput(1) && ctx.opset() >= 11 && ctx.InputDType(1) != DType::kFloat32 &&
      ctx.InputDType(1) != DType::kFloat64 && ctx.InputDType(1) != DType::kFloat16)
    return ctx.Error(std::string("roi must be float16, float or double, got ") + DTypeName(ctx.InputDType(1)));
  if (ctx.HasInput(sizes_i) && ctx.InputDType(sizes_i) != DType::kInt64)
    return ctx.Error(std::string("sizes must be int64, got ") + DTypeName(ctx.InputDType(sizes_i)));
  const bool no_scales = AbsentOrEmpty(ctx, scales_i), no_sizes = AbsentOrEmpty(ctx, sizes_i);
  if (!no_scales && !no_sizes && ctx.InputValue(scales_i) && ctx.InputValue(sizes_i))
    return ctx.Error("only one of 'scales' and 'sizes' may be given");
  if (no_scales && no_sizes) return ctx.Error("one of 'scales' and 'sizes' must be given (non-empty)");

  SymShape out = *in;
  for (int64_t a : axes) out[static_cast<size_t>(a)] = Dim();  // until the values are known
  if (!no_scales) {
    if (const Tensor* s = ctx.InputValue(scales_i)) {
      std::vector<double> full;
      WH_RETURN_IF_ERROR(ReadScales(ctx, *s, axes, r, &full));
      WH_RETURN_IF_ERROR(OutputFromScales(ctx, *in, full, &out));
    }
  } else if (const Tensor* s = ctx.InputValue(sizes_i)) {
    if (s->numel() != static_cast<int64_t>(axes.size()))
      return ctx.Error("sizes has " + std::to_string(s->numel()) + " values, expected " + std::to_string(axes.size()) +
                       " (one per resized axis)");
    const int64_t* sz = s->data<int64_t>();
    for (size_t i = 0; i < axes.size(); ++i)
      if (sz[i] < 0) return ctx.Error("sizes must be >= 0, got " + std::to_string(sz[i]));
    const std::string policy = ctx.attrs().GetString("keep_aspect_ratio_policy", "stretch");
    if (policy == "stretch") {
      for (size_t i = 0; i < axes.size(); ++i) out[static_cast<size_t>(axes[i])] = Dim(sz[i]);
    } else {
      bool all_known = true;
      for (int64_t a : axes) all_known &= (*in)[static_cast<size_t>(a)].known();
      if (all_known) {
        double scale = policy == "not_larger" ? HUGE_VAL : 0.0;
        for (size_t i = 0; i < axes.size(); ++i) {
          const int64_t d = (*in)[static_cast<size_t>(axes[i])].value;
          if (d == 0)
            return ctx.Error("keep_aspect_ratio_policy cannot scale an empty axis " + std::to_string(axes[i]));
          const double si = static_cast<double>(sz[i]) / static_cast<double>(d);
          scale = policy == "not_larger" ? std::min(scale, si) : std::max(scale, si);
        }
        for (int64_t a : axes) {
          const double v = scale * static_cast<double>((*in)[static_cast<size_t>(a)].value) + 0.5;
          if (!(v < 4.0e18)) return ctx.Error("sizes make axis " + std::to_string(a) + " too large");
          out[static_cast<size_t>(a)] = Dim(static_cast<int64_t>(v));
        }
      }
    }
  }
  ctx.SetOutput(0, dt, out);
  return Status::Ok();
}

Status InferUpsample(InferContext& ctx) {
  const DType dt = ctx.InputDType(0);
  const SymShape* in = InputShapeOrUnknownOutput(ctx);
  if (!in) return Status::Ok();
  const size_t r = in->size();
  std::vector<int64_t> axes;
  for (size_t d = 0; d < r; ++d) axes.push_back(static_cast<int64_t>(d));
  std::vector<double> full;
  if (ctx.opset() < 9) {
    const std::vector<float> s = ctx.attrs().GetFloats("scales");
    if (s.size() != r)
      return ctx.Error("scales has " + std::to_string(s.size()) + " values for an input of rank " + std::to_string(r));
    full.assign(s.begin(), s.end());
  } else if (const Tensor* t = ctx.InputValue(1)) {
    WH_RETURN_IF_ERROR(ReadScales(ctx, *t, axes, r, &full));
    for (size_t d = 0; d < r; ++d)
      if (!(full[d] >= 1.0)) return ctx.Error("scales must be >= 1, got " + std::to_string(full[d]));
  } else {
    if (ctx.InputDType(1) != DType::kFloat32)
      return ctx.Error(std::string("scales must be float, got ") + DTypeName(ctx.InputDType(1)));
    ctx.SetOutput(0, dt, SymShape(r, Dim()));
    return Status::Ok();
  }
  SymShape out;
  WH_RETURN_IF_ERROR(OutputFromScales(ctx, *in, full, &out));
  ctx.SetOutput(0, dt, out);
  return Status::Ok();
}

}  // namespace

void RegisterResampleOps(OpRegistry& r) {
  r.Register(OpDef{"",
                   "Resize",
                   10,
                   1,
                   4,
                   1,
                   1,
                   {{"mode", AttrType::kString},
                    {"coordinate_transformation_mode", AttrType::kString},
                    {"nearest_mode", AttrType::kString},
                    {"cubic_coeff_a", AttrType::kFloat},
                    {"exclude_outside", AttrType::kInt},
                    {"extrapolation_value", AttrType::kFloat},
                    {"antialias", AttrType::kInt},
                    {"axes", AttrType::kInts},
                    {"keep_aspect_ratio_policy", AttrType::kString}},
                   CheckResize,
                   InferResize,
                   /*max_opset=*/19});
  r.Register(OpDef{"",
                   "Upsample",
                   7,
                   1,
                   2,
                   1,
                   1,
                   {{"mode", AttrType::kString}, {"scales", AttrType::kFloats}},
                   CheckUpsample,
                   InferUpsample});
}

}  // namespace whittle
