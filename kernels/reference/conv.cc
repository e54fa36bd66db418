#include "kernels/reference/conv.h"

#include <string>

#include "kernels/common/fused_activation.h"

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
    const int64_t eff = (k - 1) * d + 1;
    int64_t pb = 0, pe = 0;
    if (a.auto_pad == AutoPad::kNotSet) {
      if (!a.pads.empty()) {
        pb = a.pads[i];
        pe = a.pads[i + n];
      }
    } else if (a.auto_pad == AutoPad::kSameUpper || a.auto_pad == AutoPad::kSameLower) {
      const int64_t r = in[i] % s;
      int64_t total = eff - (r == 0 ? s : r);
      if (total < 0) total = 0;
      pb = a.auto_pad == AutoPad::kSameUpper ? total / 2 : total - total / 2;
      pe = total - pb;
    }
    const int64_t span = in[i] + pb + pe - eff;
    if (span < 0)
      return InvalidArgument("window of extent " + Str(eff) + " does not fit input dim " + Str(in[i]) +
                             " with pads " + Str(pb) + "+" + Str(pe));
    g->in[i] = in[i];
    g->kernel[i] = k;
    g->stride[i] = s;
    g->dilation[i] = d;
    g->pad_begin[i] = pb;
    g->pad_end[i] = pe;
    g->out[i] = (a.ceil_mode ? (span + s - 1) / s : span / s) + 1;
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

template <class T>
void ConvReference(const ConvShape& s, const T* x, const T* w, const T* b, T* y) {
  const WindowGeometry& g = s.geo;
  const int n = g.spatial;
  const int64_t cg = s.in_channels / s.group, mg = s.out_channels / s.group;
  const int64_t in_size = g.InSize(), out_size = g.OutSize(), k_size = g.KernelSize();
  int64_t o_idx[kMaxSpatialDims], k_idx[kMaxSpatialDims];
  for (int64_t bn = 0; bn < s.batch; ++bn) {
    for (int64_t m = 0; m < s.out_channels; ++m) {
      const int64_t grp = m / mg;
      for (int64_t op = 0; op < out_size; ++op) {
        int64_t rem = op;
        for (int i = n - 1; i >= 0; --i) {
          o_idx[i] = rem % g.out[i];
          rem /= g.out[i];
        }
        double acc = b ? static_cast<double>(b[m]) : 0.0;
        for (int64_t cc = 0; cc < cg; ++cc) {
          const T* xc = x + (bn * s.in_channels + grp * cg + cc) * in_size;
          const T* wc = w + (m * cg + cc) * k_size;
          for (int64_t kp = 0; kp < k_size; ++kp) {
            int64_t krem = kp;
            for (int i = n - 1; i >= 0; --i) {
              k_idx[i] = krem % g.kernel[i];
              krem /= g.kernel[i];
            }
            int64_t off = 0;
            bool inside = true;
            for (int i = 0; i < n && inside; ++i) {
              const int64_t p = o_idx[i] * g.stride[i] - g.pad_begin[i] + k_idx[i] * g.dilation[i];
              inside = p >= 0 && p < g.in[i];
              off = off * g.in[i] + p;
            }
            if (inside) acc += static_cast<double>(xc[off]) * static_cast<double>(wc[kp]);
          }
        }
        y[(bn * s.out_channels + m) * out_size + op] = static_cast<T>(acc);
      }
    }
  }
}

template void ConvReference<float>(const ConvShape&, const float*, const float*, const float*, float*);
template void ConvReference<double>(const ConvShape&, const double*, const double*, const double*, double*);

namespace {

class ConvReferenceKernel : public OpKernel {
 public:
  ConvReferenceKernel(WindowAttrs a, int64_t group, FusedActivation act)
      : attrs_(std::move(a)), group_(group), act_(act) {}

  Status Compute(KernelContext& ctx) const override {
    const Tensor& x = *ctx.inputs[0];
    const Tensor& w = *ctx.inputs[1];
    const Tensor* b = ctx.inputs.size() > 2 ? ctx.inputs[2] : nullptr;
    ConvShape s;
    WH_RETURN_IF_ERROR(ResolveConvShape(attrs_, group_, x, w, b, &s));
    Tensor& y = *ctx.outputs[0];
    if (x.dtype() == DType::kFloat32) {
      ConvReference<float>(s, x.data<float>(), w.data<float>(), b ? b->data<float>() : nullptr, y.data<float>());
      act_.Apply(y.data<float>(), y.numel());
    } else {
      ConvReference<double>(s, x.data<double>(), w.data<double>(), b ? b->data<double>() : nullptr,
                            y.data<double>());
    }
    return Status::Ok();
  }

 private:
  WindowAttrs attrs_;
  int64_t group_;
  FusedActivation act_;
};

}  // namespace

StatusOr<std::unique_ptr<OpKernel>> CreateConvReferenceKernel(const KernelInit& init) {
  const DType dt = init.input_dtypes.empty() ? DType::kUndefined : init.input_dtypes[0];
  if (dt != DType::kFloat32 && dt != DType::kFloat64)
    return Unimplemented(std::string("Conv supports float and double, got ") + DTypeName(dt));
  WH_ASSIGN_OR_RETURN(WindowAttrs a, ParseWindowAttrs(init.attrs));
  const FusedActivation act = FusedActivation::FromAttrs(init.attrs);
  if (act.kind != FusedActivation::kNone && dt != DType::kFloat32)
    return Unimplemented("a fused activation needs float32 Conv");
  return std::unique_ptr<OpKernel>(std::make_unique<ConvReferenceKernel>(std::move(a), init.attrs.GetInt("group", 1), act));
}

}  // namespace whittle
