#include "kernels/reference/qlinear.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/common/index.h"

namespace whittle {
namespace {

std::string Str(int64_t v) { return std::to_string(v); }

int32_t ByteAt(const void* p, DType dt, int64_t i) {
  return dt == DType::kUInt8 ? static_cast<int32_t>(static_cast<const uint8_t*>(p)[i])
                             : static_cast<int32_t>(static_cast<const int8_t*>(p)[i]);
}

}  // namespace

void QEpilogueReference(const QOutput& out, const int32_t* acc, int64_t rows, int64_t cols, bool channel_is_row,
                        void* y) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t col = 0; col < cols; ++col) {
      const int64_t i = r * cols + col;
      const int64_t c = channel_is_row ? r : col;
      const int32_t a = WrapAdd(acc[i], out.BiasAt(c));
      switch (out.kind) {
        case QOutput::Kind::kInt32:
          static_cast<int32_t*>(y)[i] = a;
          break;
        case QOutput::Kind::kFloat: {
          const float v = QRequantize(a, out.MultiplierAt(c));
          static_cast<float*>(y)[i] = out.relu ? std::max(v, 0.f) : v;
          break;
        }
        case QOutput::Kind::kQuantized: {
          // Round half to even (default rounding mode), add the zero point, saturate; the
          // comparison in double keeps huge products from overflowing the int conversion.
          const double r = static_cast<double>(std::nearbyint(QRequantize(a, out.MultiplierAt(c)))) + out.zero_point;
          const int32_t q = static_cast<int32_t>(std::min<double>(std::max<double>(r, out.qmin), out.qmax));
          if (out.dtype == DType::kUInt8) static_cast<uint8_t*>(y)[i] = static_cast<uint8_t>(q);
          else static_cast<int8_t*>(y)[i] = static_cast<int8_t>(q);
          break;
        }
      }
    }
  }
}

int32_t QMatrixAt(const QMatrix& m, int64_t r, int64_t c, int64_t zp_index) {
  const int32_t v = ByteAt(m.data, m.dtype, r * m.ld + c);
  if (!m.zero_point) return v;
  const auto& zp = *m.zero_point;
  return v - (zp.size() == 1 ? zp[0] : zp[static_cast<size_t>(zp_index)]);
}

void QGemmAccReference(const QMatrix& a, const QMatrix& b, int64_t M, int64_t N, int64_t K, int32_t* acc) {
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      int64_t s = 0;  // int64 then wrapped: int32 arithmetic as the SIMD kernels do it, without UB
      for (int64_t k = 0; k < K; ++k) s += QMatrixAt(a, i, k, i) * QMatrixAt(b, k, j, j);
      acc[i * N + j] = static_cast<int32_t>(static_cast<uint32_t>(s));
    }
  }
}

StatusOr<ConvShape> ResolveQConvShape(const std::string& node, const AttributeMap& attrs, const Dims& x,
                                      const Dims& w) {
  auto wa = ParseWindowAttrs(attrs);
  if (!wa.ok()) return InvalidArgument(node + ": " + wa.status().message());
  const int64_t group = attrs.GetInt("group", 1);
  if (x.size() < 3) return InvalidArgument(node + ": x must have rank >= 3, got " + DimsToString(x));
  if (w.size() != x.size())
    return InvalidArgument(node + ": w " + DimsToString(w) + " must have the rank of x " + DimsToString(x));
  if (group < 1) return InvalidArgument(node + ": group must be >= 1, got " + Str(group));
  if (x.size() - 2 > static_cast<size_t>(kMaxSpatialDims))
    return InvalidArgument(node + ": too many spatial dims in " + DimsToString(x));
  ConvShape s;
  s.batch = x[0];
  s.in_channels = x[1];
  s.out_channels = w[0];
  s.group = group;
  if (w[1] * group != s.in_channels)
    return InvalidArgument(node + ": x has " + Str(s.in_channels) + " channels but w " + DimsToString(w) +
                           " with group " + Str(group) + " expects " + Str(w[1] * group));
  if (s.out_channels % group != 0)
    return InvalidArgument(node + ": group " + Str(group) + " does not divide the " + Str(s.out_channels) +
                           " output channels");
  const int spatial = static_cast<int>(x.size()) - 2;
  for (int i = 0; i < spatial && static_cast<size_t>(i) < wa->kernel_shape.size(); ++i)
    if (wa->kernel_shape[static_cast<size_t>(i)] != w[static_cast<size_t>(i) + 2])
      return InvalidArgument(node + ": kernel_shape does not match w " + DimsToString(w));
  Status st = ResolveWindow(*wa, x.data() + 2, w.data() + 2, spatial, &s.geo);
  if (!st.ok()) return InvalidArgument(node + ": " + st.message());
  return s;
}

void QConvAccReference(const ConvShape& s, const void* x, DType x_dtype, int32_t x_zp, const void* w, DType w_dtype,
                       const std::vector<int32_t>& w_zp, int32_t* acc) {
  const WindowGeometry& g = s.geo;
  const int64_t cg = s.in_channels / s.group, mg = s.out_channels / s.group;
  const int64_t in_size = g.InSize(), out_size = g.OutSize(), ksize = g.KernelSize();
  int64_t o_idx[kMaxSpatialDims], k_idx[kMaxSpatialDims];
  for (int64_t n = 0; n < s.batch; ++n) {
    for (int64_t m = 0; m < s.out_channels; ++m) {
      const int64_t grp = m / mg;
      const int32_t wz = w_zp.size() == 1 ? w_zp[0] : w_zp[static_cast<size_t>(m)];
      for (int64_t o = 0; o < out_size; ++o) {
        UnravelIndex(o, g.out, g.spatial, o_idx);
        int64_t sum = 0;  // wrapped to int32 below, as the SIMD kernels do
        for (int64_t c = 0; c < cg; ++c) {
          const int64_t xc = (n * s.in_channels + grp * cg + c) * in_size;
          const int64_t wc = (m * cg + c) * ksize;
          for (int64_t k = 0; k < ksize; ++k) {
            UnravelIndex(k, g.kernel, g.spatial, k_idx);
            int64_t off = 0;
            const bool inside = TapOffset(g, o_idx, k_idx, &off);
            const int32_t xv = inside ? ByteAt(x, x_dtype, xc + off) - x_zp : 0;
            sum += xv * (ByteAt(w, w_dtype, wc + k) - wz);
          }
        }
        acc[(n * s.out_channels + m) * out_size + o] = static_cast<int32_t>(static_cast<uint32_t>(sum));
      }
    }
  }
}

void DynamicQuantizeLinearReference(const float* x, int64_t n, uint8_t* y, float* y_scale, uint8_t* y_zero_point) {
  float lo = 0.f, hi = 0.f;
  for (int64_t i = 0; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  const float scale = (hi - lo) / 255.f;
  // An all-zero input has no range; ONNX Runtime then uses zero point 0 and outputs zeros.
  if (!(scale > 0.f) || !std::isfinite(scale)) {
    *y_scale = scale;
    *y_zero_point = 0;
    for (int64_t i = 0; i < n; ++i) y[i] = 0;
    return;
  }
  const float zp_f = std::nearbyint(std::min(std::max(0.f - lo / scale, 0.f), 255.f));
  const int32_t zp = static_cast<int32_t>(zp_f);
  *y_scale = scale;
  *y_zero_point = static_cast<uint8_t>(zp);
  for (int64_t i = 0; i < n; ++i) {
    const float q = std::nearbyint(x[i] / scale) + static_cast<float>(zp);
    y[i] = static_cast<uint8_t>(std::min(std::max(q, 0.f), 255.f));
  }
}

namespace reference {
namespace {

size_t OutElemSize(DType t) { return t == DType::kUInt8 || t == DType::kInt8 ? 1 : 4; }

Status QGemmRow(const QGemmCall& c, int) {
  std::vector<int32_t> acc(static_cast<size_t>(c.rows * c.N));
  QGemmAccReference(c.a, c.b, c.rows, c.N, c.K, acc.data());
  QEpilogueReference(*c.out, acc.data(), c.rows, c.N, false, c.y);
  return Status::Ok();
}

Status QConvRow(const QConvCall& c, int) {
  const ConvShape& s = *c.shape;
  const Tensor& x = *c.x;
  const Tensor& w = *c.w;
  Tensor& y = *c.y;
  const int64_t out_size = s.geo.OutSize();
  std::vector<int32_t> acc(static_cast<size_t>(y.numel()));
  QConvAccReference(s, x.raw_data(), x.dtype(), c.x_zp, w.raw_data(), w.dtype(), *c.w_zp, acc.data());
  for (int64_t n = 0; n < s.batch; ++n) {
    const int64_t off = n * s.out_channels * out_size;
    QEpilogueReference(*c.out, acc.data() + off, s.out_channels, out_size, true,
                       static_cast<char*>(y.raw_data()) + static_cast<size_t>(off) * OutElemSize(y.dtype()));
  }
  return Status::Ok();
}

Status DynamicQuantizeRow(const Tensor& x, Tensor* y, Tensor* y_scale, Tensor* y_zero_point, int) {
  uint8_t scale_zp = 0;
  float scale = 0.f;
  DynamicQuantizeLinearReference(x.data<float>(), x.numel(), y->data<uint8_t>(), &scale, &scale_zp);
  if (y_scale) y_scale->data<float>()[0] = scale;
  if (y_zero_point) y_zero_point->data<uint8_t>()[0] = scale_zp;
  return Status::Ok();
}

}  // namespace

const QLinearFns kQLinearFns{nullptr, QGemmRow, nullptr, QConvRow, DynamicQuantizeRow};
}  // namespace reference

}  // namespace whittle
