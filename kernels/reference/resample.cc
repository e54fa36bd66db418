#include "kernels/reference/resample.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#include "kernels/common/dtype_dispatch.h"

namespace whittle {
namespace {

using ew::BFloat16;
using ew::Half;

// ---------------------------------------------------------------- element conversion

template <class T>
double ToDouble(T v) {
  if constexpr (std::is_same_v<T, Half>)
    return ew::HalfToFloat(v.bits);
  else if constexpr (std::is_same_v<T, BFloat16>)
    return ew::BFloat16ToFloat(v.bits);
  else
    return static_cast<double>(v);
}

uint16_t FloatToBFloat16Rounded(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if (std::isnan(f)) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);  // round to nearest even
  return static_cast<uint16_t>(bits >> 16);
}

// double -> T as the ONNX reference casts its float64 result: floats round to nearest, integers
// round half to even and saturate (NaN gives 0), bool is v != 0.
template <class T>
T FromDouble(double v) {
  if constexpr (std::is_same_v<T, Half>) {
    return Half{ew::DoubleToHalf(v)};
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return BFloat16{FloatToBFloat16Rounded(static_cast<float>(v))};
  } else if constexpr (std::is_same_v<T, bool>) {
    return v != 0.0;
  } else if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v);
  } else {
    if (std::isnan(v)) return T(0);
    const double r = std::nearbyint(v);
    if (r <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
    if (r >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    return static_cast<T>(r);
  }
}

// ---------------------------------------------------------------- per-axis sampling tables

bool IsClose(double a, double b) { return std::fabs(a - b) <= 1e-9 * std::max(std::fabs(a), std::fabs(b)); }

// Input coordinate of output index y (ONNX coordinate_transformation_mode). output_width is
// scale * in_w, fractional when it comes from a scale, as in the ONNX reference.
double SourceCoord(const ResizeParams& p, double y, double scale, int64_t in_w, int64_t out_w, double roi_start,
                   double roi_end) {
  const double in = static_cast<double>(in_w);
  const double output_width = scale * in;
  switch (p.coord) {
    case ResizeCoord::kHalfPixel: return (y + 0.5) / scale - 0.5;
    case ResizeCoord::kHalfPixelSymmetric: {
      const double adjustment = static_cast<double>(out_w) / output_width;
      const double offset = in / 2 * (1 - adjustment);
      return offset + (y + 0.5) / scale - 0.5;
    }
    case ResizeCoord::kPytorchHalfPixel: return output_width > 1 ? (y + 0.5) / scale - 0.5 : 0.0;
    case ResizeCoord::kAlignCorners: return output_width == 1 ? 0.0 : y * (in - 1) / (output_width - 1);
    case ResizeCoord::kAsymmetric: return y / scale;
    case ResizeCoord::kTfHalfPixelForNN: return (y + 0.5) / scale;
    case ResizeCoord::kTfCropAndResize: {
      const double x = output_width > 1 ? y * (roi_end - roi_start) * (in - 1) / (output_width - 1)
                                        : (roi_end - roi_start) * (in - 1) / 2;
      return x + roi_start * (in - 1);
    }
  }
  return 0.0;
}

double CubicWeight(double x, double a) {  // Keys' cubic convolution kernel
  x = std::fabs(x);
  if (x <= 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0.0;
}

// Interpolation weights for a coordinate whose distance to the window's left neighbour is ratio
// (in (0, 1]); window tap k sits at offset (k - n/2 + 1 - ratio) from the coordinate.
std::vector<double> Coeffs(const ResizeParams& p, double ratio, double scale) {
  std::vector<double> c;
  if (p.mode == ResizeMode::kLinear && !p.antialias) {
    c = {1 - ratio, ratio};
  } else if (p.mode == ResizeMode::kCubic && !p.antialias) {
    c = {CubicWeight(1 + ratio, p.cubic_coeff_a), CubicWeight(ratio, p.cubic_coeff_a),
         CubicWeight(1 - ratio, p.cubic_coeff_a), CubicWeight(2 - ratio, p.cubic_coeff_a)};
  } else {
    // Antialias: the filter is stretched by 1/scale when the axis downsamples.
    const double s = std::min(scale, 1.0);
    const double support = p.mode == ResizeMode::kLinear ? 1.0 : 2.0;
    const int64_t start = static_cast<int64_t>(std::floor(-support / s)) + 1;
    const int64_t n = 2 - 2 * start;
    double sum = 0;
    for (int64_t k = 0; k < n; ++k) {
      const double arg = (static_cast<double>(start + k) - ratio) * s;
      const double v =
          p.mode == ResizeMode::kLinear ? std::clamp(1 - std::fabs(arg), 0.0, 1.0) : CubicWeight(arg, p.cubic_coeff_a);
      c.push_back(v);
      sum += v;
    }
    for (double& v : c) v /= sum;
  }
  return c;
}

}  // namespace

StatusOr<AxisTaps> ResizeAxisTaps(const ResizeParams& p, int64_t in_w, int64_t out_w, double scale, double roi_start,
                                  double roi_end) {
  AxisTaps t;
  const bool roi_identity =
      p.coord != ResizeCoord::kTfCropAndResize || (IsClose(roi_start, 0.0) && IsClose(roi_end, 1.0));
  // An axis that keeps its size and scale is copied (as the ONNX reference skips it).
  if (IsClose(scale, 1.0) && out_w == in_w && roi_identity) {
    t.identity = true;
    return t;
  }
  if (in_w == 0) {
    if (out_w != 0) return InvalidArgument("cannot resize an empty axis to " + std::to_string(out_w));
    return t;
  }
  t.outside.assign(static_cast<size_t>(out_w), 0);
  for (int64_t y = 0; y < out_w; ++y) {
    const double x = SourceCoord(p, static_cast<double>(y), scale, in_w, out_w, roi_start, roi_end);
    if (!std::isfinite(x))
      return InvalidArgument("resize coordinate is not finite (scale " + std::to_string(scale) + ")");
    if (p.coord == ResizeCoord::kTfCropAndResize && (x < 0 || x > static_cast<double>(in_w - 1)))
      t.outside[static_cast<size_t>(y)] = 1;
    const double fl = std::floor(x);
    const bool integer = x == fl;
    const int64_t f = static_cast<int64_t>(fl);
    if (p.mode == ResizeMode::kNearest) {
      const double frac = x - fl;
      int64_t i = f;
      if (!integer) {
        switch (p.nearest) {
          case ResizeNearest::kRoundPreferFloor: i = frac <= 0.5 ? f : f + 1; break;
          case ResizeNearest::kRoundPreferCeil: i = frac < 0.5 ? f : f + 1; break;
          case ResizeNearest::kFloor: i = f; break;
          case ResizeNearest::kCeil: i = f + 1; break;
          case ResizeNearest::kSimple: i = scale < 1 ? f + 1 : f; break;
        }
      }
      t.idx.push_back(std::clamp<int64_t>(i, 0, in_w - 1));
      t.w.push_back(1.0);
      continue;
    }
    // The ratio is in (0, 1]: an integer coordinate takes the right-hand tap with ratio 1.
    const double ratio = integer ? 1.0 : x - fl;
    std::vector<double> c = Coeffs(p, ratio, scale);
    const int n = static_cast<int>(c.size());
    t.n = n;
    const int64_t start = integer ? f - n / 2 : f - n / 2 + 1;
    if (p.exclude_outside) {
      double sum = 0;
      for (int k = 0; k < n; ++k) {
        const int64_t i = start + k;
        if (i < 0 || i >= in_w) c[static_cast<size_t>(k)] = 0;
        sum += c[static_cast<size_t>(k)];
      }
      if (sum != 0)
        for (double& v : c) v /= sum;
    }
    for (int k = 0; k < n; ++k) {
      t.idx.push_back(std::clamp<int64_t>(start + k, 0, in_w - 1));
      t.w.push_back(c[static_cast<size_t>(k)]);
    }
  }
  return t;
}

namespace {

// ---------------------------------------------------------------- nearest: a gather

template <class T>
Status ResizeNearestT(const Tensor& in, const std::vector<AxisTaps>& taps, double extrapolation, Tensor* out) {
  const Dims& od = out->dims();
  const size_t r = od.size();
  const std::vector<int64_t> strides = [&] {
    std::vector<int64_t> s(r, 1);
    for (size_t d = r; d-- > 1;) s[d - 1] = s[d] * in.dims()[d];
    return s;
  }();
  const T* src = static_cast<const T*>(in.raw_data());
  T* dst = static_cast<T*>(out->raw_data());
  const T ev = FromDouble<T>(extrapolation);
  std::vector<int64_t> y(r, 0);
  const int64_t total = out->numel();
  for (int64_t o = 0; o < total; ++o) {
    int64_t off = 0;
    bool outside = false;
    for (size_t d = 0; d < r; ++d) {
      const AxisTaps& t = taps[d];
      const size_t yd = static_cast<size_t>(y[d]);
      if (t.identity) {
        off += y[d] * strides[d];
      } else {
        off += t.idx[yd] * strides[d];
        outside |= t.outside[yd] != 0;
      }
    }
    dst[o] = outside ? ev : src[off];
    for (size_t d = r; d-- > 0;) {
      if (++y[d] < od[d]) break;
      y[d] = 0;
    }
  }
  return Status::Ok();
}

// ---------------------------------------------------------------- linear, cubic: separable

template <class T>
Status ResizeInterpT(const Tensor& in, const std::vector<AxisTaps>& taps, double extrapolation, Tensor* out) {
  const size_t r = static_cast<size_t>(in.rank());
  Dims cur_dims = in.dims();
  std::vector<double> cur(static_cast<size_t>(in.numel()));
  const T* src = static_cast<const T*>(in.raw_data());
  for (size_t i = 0; i < cur.size(); ++i) cur[i] = ToDouble(src[i]);
  for (size_t d = 0; d < r; ++d) {
    const AxisTaps& t = taps[d];
    if (t.identity) continue;
    int64_t outer = 1, inner = 1;
    for (size_t k = 0; k < d; ++k) outer *= cur_dims[k];
    for (size_t k = d + 1; k < r; ++k) inner *= cur_dims[k];
    const int64_t in_w = cur_dims[d], out_w = out->dims()[d];
    std::vector<double> next(static_cast<size_t>(outer * out_w * inner));
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t y = 0; y < out_w; ++y) {
        double* dst = &next[static_cast<size_t>((o * out_w + y) * inner)];
        if (t.outside[static_cast<size_t>(y)]) {
          std::fill(dst, dst + inner, extrapolation);
          continue;
        }
        std::fill(dst, dst + inner, 0.0);
        for (int k = 0; k < t.n; ++k) {
          const size_t tap = static_cast<size_t>(y * t.n + k);
          const double w = t.w[tap];
          const double* s = &cur[static_cast<size_t>((o * in_w + t.idx[tap]) * inner)];
          for (int64_t i = 0; i < inner; ++i) dst[i] += w * s[i];
        }
      }
    }
    cur.swap(next);
    cur_dims[d] = out_w;
  }
  if (cur_dims != out->dims())
    return Internal("Resize: computed dims " + DimsToString(cur_dims) + " differ from " + DimsToString(out->dims()));
  T* dst = static_cast<T*>(out->raw_data());
  for (size_t i = 0; i < cur.size(); ++i) dst[i] = FromDouble<T>(cur[i]);
  return Status::Ok();
}

}  // namespace

Status ResizeReference(const Tensor& in, const std::vector<double>& scales, const std::vector<double>& roi,
                       const ResizeParams& p, Tensor* out) {
  const size_t r = static_cast<size_t>(in.rank());
  if (scales.size() != r || out->rank() != in.rank() || out->dtype() != in.dtype())
    return InvalidArgument("Resize: scales, input " + DimsToString(in.dims()) + " and output " +
                           DimsToString(out->dims()) + " disagree");
  if (!roi.empty() && roi.size() != 2 * r)
    return InvalidArgument("Resize: roi has " + std::to_string(roi.size()) + " values, expected " +
                           std::to_string(2 * r));
  if (p.coord == ResizeCoord::kTfCropAndResize && roi.empty())
    return InvalidArgument("Resize: coordinate_transformation_mode tf_crop_and_resize needs roi");
  std::vector<AxisTaps> taps;
  for (size_t d = 0; d < r; ++d) {
    const double rs = roi.empty() ? 0.0 : roi[d], re = roi.empty() ? 1.0 : roi[d + r];
    auto t = ResizeAxisTaps(p, in.dims()[d], out->dims()[d], scales[d], rs, re);
    if (!t.ok()) return t.status();
    taps.push_back(std::move(*t));
  }
  if (out->numel() == 0) return Status::Ok();
  if (p.mode == ResizeMode::kNearest)
    return ew::Dispatch<ew::TypeSet::kAll>(in.dtype(), "Resize", [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      return ResizeNearestT<T>(in, taps, p.extrapolation_value, out);
    });
  if (in.dtype() == DType::kBool)
    return InvalidArgument("Resize: linear and cubic modes need a numeric type, got bool");
  return ew::Dispatch<ew::TypeSet::kAll>(in.dtype(), "Resize", [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, bool>)
      return Internal("unreachable");
    else
      return ResizeInterpT<T>(in, taps, p.extrapolation_value, out);
  });
}

namespace reference {
const ResampleFns kResampleFns{&ResizeReference};
}  // namespace reference

}  // namespace whittle
