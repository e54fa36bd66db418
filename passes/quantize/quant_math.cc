#include "passes/quantize/quant_math.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace whittle::quant {
namespace {

// nearbyint under the default rounding mode is round-half-to-even, as QuantizeLinear specifies.
int64_t RoundHalfEven(double x) { return static_cast<int64_t>(std::nearbyint(x)); }

}  // namespace

void QRange(DType dt, int32_t* qmin, int32_t* qmax) {
  if (dt == DType::kInt8) {
    *qmin = -128;
    *qmax = 127;
  } else {
    *qmin = 0;
    *qmax = 255;
  }
}

ActParams ChooseActParams(float lo, float hi, DType dtype) {
  ActParams p;
  p.dtype = dtype;
  if (!std::isfinite(lo)) lo = 0;
  if (!std::isfinite(hi)) hi = 0;
  lo = std::min(lo, 0.f);
  hi = std::max(hi, 0.f);
  p.lo = lo;
  p.hi = hi;
  if (dtype == DType::kInt8) {
    const float amax = std::max(-lo, hi);
    p.scale = amax > 0 ? amax / 127.f : 1.f;
    p.zero_point = 0;
    return p;
  }
  if (hi - lo <= 0) {
    p.scale = 1.f;
    p.zero_point = 0;
    return p;
  }
  p.scale = (hi - lo) / 255.f;
  const double zp = RoundHalfEven(-static_cast<double>(lo) / p.scale);
  p.zero_point = static_cast<int32_t>(std::clamp<double>(zp, 0, 255));
  return p;
}

int32_t QuantizeValue(float x, const ActParams& p) {
  int32_t qmin, qmax;
  QRange(p.dtype, &qmin, &qmax);
  // Saturate before converting: an infinite (or huge) x, such as an absent Clip bound, must not
  // overflow the integer conversion.
  const double q = std::nearbyint(static_cast<double>(x / p.scale)) + p.zero_point;
  if (std::isnan(q)) return p.zero_point;
  return static_cast<int32_t>(std::clamp<double>(q, qmin, qmax));
}

float DequantizeValue(int32_t q, const ActParams& p) { return static_cast<float>(q - p.zero_point) * p.scale; }

QuantizedWeight QuantizeWeightSymmetric(const Tensor& w, int64_t axis, int qmax) {
  QuantizedWeight r;
  r.axis = axis;
  r.values = Tensor(DType::kInt8, w.dims());
  const float* src = w.data<float>();
  int8_t* dst = r.values.data<int8_t>();
  int64_t outer = 1, channels = 1, inner = 1;
  if (axis >= 0) {
    for (int d = 0; d < axis; ++d) outer *= w.dim(d);
    channels = w.dim(static_cast<int>(axis));
    for (int d = static_cast<int>(axis) + 1; d < w.rank(); ++d) inner *= w.dim(d);
  } else {
    inner = w.numel();
  }
  std::vector<float> amax(static_cast<size_t>(channels), 0.f);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t i = 0; i < inner; ++i)
        amax[static_cast<size_t>(c)] = std::max(amax[static_cast<size_t>(c)], std::fabs(src[(o * channels + c) * inner + i]));
  r.scales.resize(static_cast<size_t>(channels));
  for (int64_t c = 0; c < channels; ++c) {
    const float a = amax[static_cast<size_t>(c)];
    r.scales[static_cast<size_t>(c)] = a > 0 && std::isfinite(a) ? a / static_cast<float>(qmax) : 1.f;
  }
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < channels; ++c) {
      const float s = r.scales[static_cast<size_t>(c)];
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t k = (o * channels + c) * inner + i;
        const int64_t q = RoundHalfEven(static_cast<double>(src[k] / s));
        dst[k] = static_cast<int8_t>(std::clamp<int64_t>(q, -qmax, qmax));
      }
    }
  return r;
}

Tensor Transpose2D(const Tensor& t) {
  WH_CHECK(t.rank() == 2);
  const int64_t rows = t.dim(0), cols = t.dim(1);
  Tensor out(t.dtype(), {cols, rows});
  const size_t es = DTypeSize(t.dtype());
  const char* src = static_cast<const char*>(t.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      std::copy_n(src + static_cast<size_t>(i * cols + j) * es, es, dst + static_cast<size_t>(j * rows + i) * es);
  return out;
}

std::vector<float> BiasScales(float a_scale, const std::vector<float>& w_scales) {
  std::vector<float> s(w_scales.size());
  for (size_t i = 0; i < w_scales.size(); ++i) s[i] = a_scale * w_scales[i];
  return s;
}

Tensor QuantizeBias(const Tensor& b, float a_scale, const std::vector<float>& w_scales) {
  const int64_t n = b.numel();
  const std::vector<float> s = BiasScales(a_scale, w_scales);
  Tensor out(DType::kInt32, {n});
  const float* src = b.data<float>();
  int32_t* dst = out.data<int32_t>();
  constexpr double kLo = std::numeric_limits<int32_t>::min(), kHi = std::numeric_limits<int32_t>::max();
  for (int64_t i = 0; i < n; ++i) {
    const float sc = s.size() == 1 ? s[0] : s[static_cast<size_t>(i)];
    const double q = sc > 0 ? std::nearbyint(static_cast<double>(src[i]) / sc) : 0.0;
    dst[i] = static_cast<int32_t>(std::clamp(q, kLo, kHi));
  }
  return out;
}

}  // namespace whittle::quant
