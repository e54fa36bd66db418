#include "lib/ir/window.h"

#include <limits>

#include <string>

namespace whittle {
namespace {

std::string Str(int64_t v) { return std::to_string(v); }

Status CheckLength(const std::vector<int64_t>& v, size_t want, const char* name) {
  if (!v.empty() && v.size() != want)
    return InvalidArgument(std::string(name) + " has " + Str(static_cast<int64_t>(v.size())) + " values, expected " +
                           Str(static_cast<int64_t>(want)));
  return Status::Ok();
}

}  // namespace

StatusOr<WindowAttrs> ParseWindowAttrs(const AttributeMap& attrs) {
  WindowAttrs a;
  const std::string ap = attrs.GetString("auto_pad", "NOTSET");
  if (ap == "NOTSET" || ap.empty()) a.auto_pad = AutoPad::kNotSet;
  else if (ap == "SAME_UPPER") a.auto_pad = AutoPad::kSameUpper;
  else if (ap == "SAME_LOWER") a.auto_pad = AutoPad::kSameLower;
  else if (ap == "VALID") a.auto_pad = AutoPad::kValid;
  else return InvalidArgument("auto_pad '" + ap + "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
  a.kernel_shape = attrs.GetInts("kernel_shape");
  a.strides = attrs.GetInts("strides");
  a.dilations = attrs.GetInts("dilations");
  a.pads = attrs.GetInts("pads");
  a.ceil_mode = attrs.GetInt("ceil_mode", 0) != 0;
  for (int64_t v : a.kernel_shape)
    if (v <= 0) return InvalidArgument("kernel_shape values must be > 0, got " + Str(v));
  for (int64_t v : a.strides)
    if (v <= 0) return InvalidArgument("strides must be > 0, got " + Str(v));
  for (int64_t v : a.dilations)
    if (v <= 0) return InvalidArgument("dilations must be > 0, got " + Str(v));
  for (int64_t v : a.pads)
    if (v < 0) return InvalidArgument("pads must be >= 0, got " + Str(v));
  if (a.pads.size() % 2 != 0) return InvalidArgument("pads must have an even number of values");
  size_t n = a.kernel_shape.size();
  if (n == 0) n = !a.strides.empty() ? a.strides.size() : !a.dilations.empty() ? a.dilations.size() : a.pads.size() / 2;
  WH_RETURN_IF_ERROR(CheckLength(a.strides, n, "strides"));
  WH_RETURN_IF_ERROR(CheckLength(a.dilations, n, "dilations"));
  WH_RETURN_IF_ERROR(CheckLength(a.pads, 2 * n, "pads"));
  return a;
}

Status ResolveWindow(const WindowAttrs& a, const int64_t* in, const int64_t* kernel, int spatial,
                     WindowGeometry* g) {
  if (spatial < 1 || spatial > kMaxSpatialDims)
    return Unimplemented("windows over " + Str(spatial) + " spatial dims are not supported (1.." +
                         Str(kMaxSpatialDims) + ")");
  const size_t n = static_cast<size_t>(spatial);
  if (!a.kernel_shape.empty() && a.kernel_shape.size() != n)
    return InvalidArgument("kernel_shape has " + Str(static_cast<int64_t>(a.kernel_shape.size())) +
                           " values for an input with " + Str(spatial) + " spatial dims");
  WH_RETURN_IF_ERROR(CheckLength(a.strides, n, "strides"));
  WH_RETURN_IF_ERROR(CheckLength(a.dilations, n, "dilations"));
  WH_RETURN_IF_ERROR(CheckLength(a.pads, 2 * n, "pads"));
  g->spatial = spatial;
  for (size_t i = 0; i < n; ++i) {
    const int64_t k = kernel[i], s = a.strides.empty() ? 1 : a.strides[i];
    const int64_t d = a.dilations.empty() ? 1 : a.dilations[i];
    if (k <= 0) return InvalidArgument("kernel dims must be > 0, got " + Str(k));
    if (in[i] < 0) return InvalidArgument("negative input dim " + Str(in[i]));
    if (s <= 0 || d <= 0) return InvalidArgument("strides and dilations must be > 0, got " + Str(s) + " and " + Str(d));
    // In 128 bits: kernel, dilation, pads and strides come from the model (pads of 2^62 at both
    // ends overflowed here, fuzzing); results past 2^63 are refused.
    using Wide = __int128;
    const Wide eff = Wide(k - 1) * d + 1;
    Wide pb = 0, pe = 0;
    if (a.auto_pad == AutoPad::kNotSet) {
      if (!a.pads.empty()) {
        pb = a.pads[i];
        pe = a.pads[i + n];
      }
    } else if (a.auto_pad == AutoPad::kSameUpper || a.auto_pad == AutoPad::kSameLower) {
      const int64_t r = in[i] % s;
      Wide total = eff - (r == 0 ? s : r);
      if (total < 0) total = 0;
      pb = a.auto_pad == AutoPad::kSameUpper ? total / 2 : total - total / 2;
      pe = total - pb;
    }
    const Wide span = Wide(in[i]) + pb + pe - eff;
    constexpr Wide kMax = std::numeric_limits<int64_t>::max();
    if (eff > kMax || pb > kMax || pe > kMax || span > kMax)
      return InvalidArgument("window dim " + Str(static_cast<int64_t>(i)) + ": kernel, dilation and pads pass 2^63");
    if (span < 0)
      return InvalidArgument("window of extent " + Str(static_cast<int64_t>(eff)) + " does not fit input dim " +
                             Str(in[i]) + " with pads " + Str(static_cast<int64_t>(pb)) + "+" +
                             Str(static_cast<int64_t>(pe)));
    g->in[i] = in[i];
    g->kernel[i] = k;
    g->stride[i] = s;
    g->dilation[i] = d;
    g->pad_begin[i] = static_cast<int64_t>(pb);
    g->pad_end[i] = static_cast<int64_t>(pe);
    g->out[i] = static_cast<int64_t>((a.ceil_mode ? (span + s - 1) / s : span / s) + 1);
  }
  return Status::Ok();
}

Status ResolveConvShape(const WindowAttrs& a, int64_t group, const Tensor& x, const Tensor& w, const Tensor* b,
                        ConvShape* s) {
  if (x.rank() < 3) return InvalidArgument("Conv input X must have rank >= 3, got " + DimsToString(x.dims()));
  if (w.rank() != x.rank())
    return InvalidArgument("Conv weight W " + DimsToString(w.dims()) + " must have the rank of X " +
                           DimsToString(x.dims()));
  if (w.dtype() != x.dtype() || (b && b->dtype() != x.dtype()))
    return InvalidArgument("Conv inputs must share one element type");
  if (group < 1) return InvalidArgument("group must be >= 1, got " + Str(group));
  const int spatial = x.rank() - 2;
  s->batch = x.dim(0);
  s->in_channels = x.dim(1);
  s->out_channels = w.dim(0);
  s->group = group;
  if (w.dim(1) * group != s->in_channels)
    return InvalidArgument("Conv X has " + Str(s->in_channels) + " channels but W " + DimsToString(w.dims()) +
                           " with group " + Str(group) + " expects " + Str(w.dim(1) * group));
  if (s->out_channels % group != 0)
    return InvalidArgument("Conv group " + Str(group) + " does not divide the " + Str(s->out_channels) +
                           " output channels");
  if (!a.kernel_shape.empty()) {
    for (int i = 0; i < spatial && static_cast<size_t>(i) < a.kernel_shape.size(); ++i)
      if (a.kernel_shape[static_cast<size_t>(i)] != w.dim(i + 2))
        return InvalidArgument("kernel_shape does not match W " + DimsToString(w.dims()));
  }
  if (b && (b->rank() != 1 || b->dim(0) != s->out_channels))
    return InvalidArgument("Conv bias B must have shape [" + Str(s->out_channels) + "], got " +
                           DimsToString(b->dims()));
  return ResolveWindow(a, x.dims().data() + 2, w.dims().data() + 2, spatial, &s->geo);
}

Geo2D To2D(const WindowGeometry& g) {
  if (g.spatial == 1)
    return {1, g.in[0], 1, g.out[0], 1, g.kernel[0], 1, g.stride[0], 1, g.dilation[0], 0, g.pad_begin[0], 0,
            g.pad_end[0]};
  return {g.in[0],     g.in[1],     g.out[0],       g.out[1],       g.kernel[0],  g.kernel[1],  g.stride[0],
          g.stride[1], g.dilation[0], g.dilation[1], g.pad_begin[0], g.pad_begin[1], g.pad_end[0], g.pad_end[1]};
}


Status ResolveConvTransposeShape(const ConvTransposeAttrs& a, const Tensor& x, const Tensor& w, const Tensor* b,
                                 ConvTransposeShape* s) {
  if (x.rank() < 3)
    return InvalidArgument("ConvTranspose input X must have rank >= 3, got " + DimsToString(x.dims()));
  if (w.rank() != x.rank())
    return InvalidArgument("ConvTranspose weight W " + DimsToString(w.dims()) + " must have the rank of X " +
                           DimsToString(x.dims()));
  if (w.dtype() != x.dtype() || (b && b->dtype() != x.dtype()))
    return InvalidArgument("ConvTranspose inputs must share one element type");
  const int spatial = x.rank() - 2;
  if (spatial > kMaxSpatialDims)
    return Unimplemented("ConvTranspose over " + Str(spatial) + " spatial dims is not supported");
  const size_t n = static_cast<size_t>(spatial);
  const int64_t group = a.group;
  s->batch = x.dim(0);
  s->in_channels = x.dim(1);
  s->group = group;
  if (w.dim(0) != s->in_channels)
    return InvalidArgument("ConvTranspose X has " + Str(s->in_channels) + " channels but W " +
                           DimsToString(w.dims()) + " expects " + Str(w.dim(0)));
  if (s->in_channels % group != 0)
    return InvalidArgument("ConvTranspose group " + Str(group) + " does not divide the " + Str(s->in_channels) +
                           " input channels");
  s->out_channels = w.dim(1) * group;
  if (b && (b->rank() != 1 || b->dim(0) != s->out_channels))
    return InvalidArgument("ConvTranspose bias B must have shape [" + Str(s->out_channels) + "], got " +
                           DimsToString(b->dims()));
  const WindowAttrs& wa = a.window;
  if (!wa.kernel_shape.empty()) {
    if (wa.kernel_shape.size() != n)
      return InvalidArgument("kernel_shape has " + Str(static_cast<int64_t>(wa.kernel_shape.size())) +
                             " values for an input with " + Str(spatial) + " spatial dims");
    for (int i = 0; i < spatial; ++i)
      if (wa.kernel_shape[static_cast<size_t>(i)] != w.dim(i + 2))
        return InvalidArgument("kernel_shape does not match W " + DimsToString(w.dims()));
  }
  WH_RETURN_IF_ERROR(CheckLength(wa.strides, n, "strides"));
  WH_RETURN_IF_ERROR(CheckLength(wa.dilations, n, "dilations"));
  WH_RETURN_IF_ERROR(CheckLength(wa.pads, 2 * n, "pads"));
  WH_RETURN_IF_ERROR(CheckLength(a.output_padding, n, "output_padding"));
  if (!a.output_shape.empty() && a.output_shape.size() != n && a.output_shape.size() != n + 2)
    return InvalidArgument("output_shape has " + Str(static_cast<int64_t>(a.output_shape.size())) +
                           " values, expected " + Str(spatial) + " (or " + Str(spatial + 2) + " with N and C)");
  WindowGeometry& g = s->geo;
  g.spatial = spatial;
  for (size_t i = 0; i < n; ++i) {
    const int64_t in = x.dim(static_cast<int>(i) + 2), k = w.dim(static_cast<int>(i) + 2);
    const int64_t st = wa.strides.empty() ? 1 : wa.strides[i], d = wa.dilations.empty() ? 1 : wa.dilations[i];
    const int64_t op = a.output_padding.empty() ? 0 : a.output_padding[i];
    // In 128 bits, refused past 2^63: strides, dilations, pads and output_shape come from the model
    // (a stride of 2^63-1 times 2 overflowed here, fuzzing).
    using Wide = __int128;
    constexpr Wide kMax = std::numeric_limits<int64_t>::max();
    const Wide natural = Wide(st) * (in - 1) + op + Wide(k - 1) * d + 1;  // output size without pads
    Wide out, pb, pe;
    const bool same = wa.auto_pad == AutoPad::kSameUpper || wa.auto_pad == AutoPad::kSameLower;
    if (!a.output_shape.empty() || same) {
      out = !a.output_shape.empty() ? Wide(a.output_shape[a.output_shape.size() - n + i]) : Wide(in) * st;
      const Wide total = natural - out;
      const Wide half = total >= 0 ? total / 2 : -((-total + 1) / 2);  // floor(total / 2)
      if (wa.auto_pad == AutoPad::kSameUpper) {
        pb = half;
        pe = total - pb;
      } else {
        pe = half;
        pb = total - pe;
      }
    } else {
      pb = pe = 0;
      if (wa.auto_pad == AutoPad::kNotSet && !wa.pads.empty()) {
        pb = wa.pads[i];
        pe = wa.pads[i + n];
      }
      out = natural - pb - pe;
      if (out <= 0)
        return InvalidArgument("ConvTranspose pads " + Str(static_cast<int64_t>(pb)) + "+" +
                               Str(static_cast<int64_t>(pe)) + " leave no output for input dim " + Str(in));
    }
    if (natural > kMax || out > kMax || pb > kMax || pe > kMax || pb < -kMax || pe < -kMax)
      return InvalidArgument("ConvTranspose dim " + Str(static_cast<int64_t>(i)) +
                             ": strides, dilations, pads or output_shape pass 2^63");
    g.in[i] = static_cast<int64_t>(out);
    g.out[i] = in;
    g.kernel[i] = k;
    g.stride[i] = st;
    g.dilation[i] = d;
    g.pad_begin[i] = static_cast<int64_t>(pb);
    g.pad_end[i] = static_cast<int64_t>(pe);
  }
  return Status::Ok();
}

}  // namespace whittle
