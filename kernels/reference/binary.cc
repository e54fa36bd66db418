#include "kernels/reference/binary.h"

#include <cmath>
#include <string>

namespace whittle {

Status BinaryMatMulReference(const BinaryAttrs& a, const Tensor& x, const Tensor& bits, const Tensor& alpha,
                             const Tensor* bias, Tensor* y) {
  const int64_t M = x.numel() / a.k, words = BinaryWords(a.k);
  const float* A = x.data<float>();
  const uint64_t* W = bits.data<uint64_t>();
  float* Y = y->data<float>();
  for (int64_t m = 0; m < M; ++m) {
    const float* row = A + m * a.k;
    double beta = 1;
    if (a.binary) {
      beta = 0;
      for (int64_t k = 0; k < a.k; ++k) beta += std::fabs(row[k]);
      beta /= static_cast<double>(a.k);
    }
    for (int64_t n = 0; n < a.n; ++n) {
      double s = 0;
      for (int64_t k = 0; k < a.k; ++k) {
        const double v = a.binary ? (row[k] >= 0.f ? 1.0 : -1.0) : row[k];
        s += BinaryBit(W + n * words, k) ? v : -v;
      }
      const float v = static_cast<float>(beta * alpha.data<float>()[n] * s + (bias ? bias->data<float>()[n] : 0.f));
      Y[m * a.n + n] = a.relu && !(v > 0.f) ? 0.f : v;
    }
  }
  return Status::Ok();
}

Status BinaryConvReference(const BinaryConvAttrs& a, const Tensor& x, const Tensor& bits, const Tensor& alpha,
                           const Tensor* bias, Tensor* y) {
  ConvShape s;
  WH_RETURN_IF_ERROR(ResolveBinaryConv(a, x, &s));
  const WindowGeometry& g = s.geo;
  const int64_t cg = a.in_channels / a.group, mg = a.b.n / a.group, words = BinaryWords(a.b.k);
  const int64_t kh = g.kernel[0], kw = g.kernel[1], in = g.InSize(), out = g.OutSize();
  const float* X = x.data<float>();
  float* Y = y->data<float>();
  for (int64_t n = 0; n < s.batch; ++n) {
    const float* xs = X + n * a.in_channels * in;
    double beta = 1;
    if (a.b.binary) {
      beta = 0;
      for (int64_t i = 0; i < a.in_channels * in; ++i) beta += std::fabs(xs[i]);
      beta /= static_cast<double>(a.in_channels * in);
    }
    for (int64_t m = 0; m < a.b.n; ++m) {
      const uint64_t* wrow = bits.data<uint64_t>() + m * words;
      const int64_t c0 = (m / mg) * cg;
      for (int64_t oy = 0; oy < g.out[0]; ++oy)
        for (int64_t ox = 0; ox < g.out[1]; ++ox) {
          double sum = 0;
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t ky = 0; ky < kh; ++ky)
              for (int64_t kx = 0; kx < kw; ++kx) {
                const int64_t iy = oy * g.stride[0] - g.pad_begin[0] + ky * g.dilation[0];
                const int64_t ix = ox * g.stride[1] - g.pad_begin[1] + kx * g.dilation[1];
                if (iy < 0 || iy >= g.in[0] || ix < 0 || ix >= g.in[1]) continue;
                const float f = xs[(c0 + c) * in + iy * g.in[1] + ix];
                const double v = a.b.binary ? (f >= 0.f ? 1.0 : -1.0) : f;
                sum += BinaryBit(wrow, (c * kh + ky) * kw + kx) ? v : -v;
              }
          const float v =
              static_cast<float>(beta * alpha.data<float>()[m] * sum + (bias ? bias->data<float>()[m] : 0.f));
          Y[(n * a.b.n + m) * out + oy * g.out[1] + ox] = a.b.relu && !(v > 0.f) ? 0.f : v;
        }
    }
  }
  return Status::Ok();
}

namespace reference {
namespace {
KernelOr MakeMatMul(const BinaryAttrs& a, const KernelInit&) {
  return WrapFnKernel([a](KernelContext& ctx) {
    return BinaryMatMulReference(a, *ctx.inputs[0], *ctx.inputs[1], *ctx.inputs[2],
                                 ctx.inputs.size() > 3 ? ctx.inputs[3] : nullptr, ctx.outputs[0]);
  });
}
KernelOr MakeConv(const BinaryConvAttrs& a, const KernelInit&) {
  return WrapFnKernel([a](KernelContext& ctx) {
    return BinaryConvReference(a, *ctx.inputs[0], *ctx.inputs[1], *ctx.inputs[2],
                               ctx.inputs.size() > 3 ? ctx.inputs[3] : nullptr, ctx.outputs[0]);
  });
}
}  // namespace
const BinaryFns kBinaryFns{MakeMatMul, MakeConv};
}  // namespace reference

}  // namespace whittle
