#include "kernels/reference/signal.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <string>
#include <vector>

#include "lib/ir/memory_meter.h"
#include "lib/ir/run_deadline.h"

namespace whittle {
namespace {

template <class T>
void Dft(const Tensor& x, const DftShape& s, bool inverse, bool onesided, Tensor* y) {
  const Dims& d = x.dims();
  const int64_t rank = x.rank(), axis = s.axis, N = s.length;
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= d[static_cast<size_t>(i)];
  for (int64_t i = axis + 1; i < rank - 1; ++i) inner *= d[static_cast<size_t>(i)];
  const int64_t in_len = d[static_cast<size_t>(axis)], c_in = d.back(), c_out = s.out_comp, out_len = s.out_len;
  const bool irfft = inverse && onesided;
  // N comes from the model or an input value (dft_length): the two length-N buffers below are
  // held to the memory budget, and the O(N^2) sums stop at the run's deadline.
  CheckScratch(N, 2 * static_cast<int64_t>(sizeof(std::complex<double>)), "DFT");
  const bool long_rows = N >= 256;
  // e^{-2 pi i m / N} for m in [0, N); the inverse conjugates.
  std::vector<std::complex<double>> tw(static_cast<size_t>(N));
  for (int64_t m = 0; m < N; ++m) {
    const double a = -2.0 * M_PI * static_cast<double>(m) / static_cast<double>(N);
    tw[static_cast<size_t>(m)] = {std::cos(a), inverse ? -std::sin(a) : std::sin(a)};
  }
  // The signal as the sum sees it: N values (irfft: the full Hermitian spectrum).
  std::vector<std::complex<double>> sig(static_cast<size_t>(N));
  const T* X = x.data<T>();
  T* Y = y->data<T>();
  const int64_t used = irfft ? std::min(in_len, N / 2 + 1) : std::min(in_len, N);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      if (RunDeadlinePassed()) return;
      std::fill(sig.begin(), sig.end(), std::complex<double>());
      for (int64_t n = 0; n < used; ++n) {
        const T* p = X + ((o * in_len + n) * inner + i) * c_in;
        sig[static_cast<size_t>(n)] = {static_cast<double>(p[0]), c_in == 2 ? static_cast<double>(p[1]) : 0.0};
      }
      if (irfft)
        for (int64_t k = N / 2 + 1; k < N; ++k) sig[static_cast<size_t>(k)] = std::conj(sig[static_cast<size_t>(N - k)]);
      for (int64_t k = 0; k < out_len; ++k) {
        if (long_rows && RunDeadlinePassed()) return;
        std::complex<double> acc;
        for (int64_t n = 0; n < N; ++n) acc += sig[static_cast<size_t>(n)] * tw[static_cast<size_t>((k * n) % N)];
        if (inverse) acc /= static_cast<double>(N);
        T* q = Y + ((o * out_len + k) * inner + i) * c_out;
        q[0] = static_cast<T>(acc.real());
        if (c_out == 2) q[1] = static_cast<T>(acc.imag());
      }
    }
}

}  // namespace

Status DftReference(const Tensor& x, const DftShape& s, bool inverse, bool onesided, Tensor* y) {
  if (x.dtype() != DType::kFloat32 && x.dtype() != DType::kFloat64)
    return InvalidArgument(std::string("DFT input is ") + DTypeName(x.dtype()) + ", expected float32 or float64");
  Dims want = x.dims();
  want[static_cast<size_t>(s.axis)] = s.out_len;
  want.back() = s.out_comp;
  if (y->dtype() != x.dtype() || y->dims() != want)
    return InvalidArgument("DFT output is " + DimsToString(y->dims()) + ", expected " + DimsToString(want));
  if (y->numel() == 0) return Status::Ok();
  if (x.dtype() == DType::kFloat32) Dft<float>(x, s, inverse, onesided, y);
  else Dft<double>(x, s, inverse, onesided, y);
  return Status::Ok();
}

namespace reference {
namespace {

KernelOr MakeDft(const KernelInit& init) {
  const bool inverse = init.attrs.GetInt("inverse", 0) != 0;
  const bool onesided = init.attrs.GetInt("onesided", 0) != 0;
  const int opset = init.opset;
  const int64_t axis_attr = opset >= 20 ? -2 : init.attrs.GetInt("axis", 1);
  const std::string name = init.node_name;
  return WrapFnKernel([=](KernelContext& ctx) -> Status {
    const Tensor& x = *ctx.inputs[0];
    int64_t dft_length = -1, axis = axis_attr;
    if (ctx.inputs.size() > 1 && ctx.inputs[1]) {
      WH_ASSIGN_OR_RETURN(dft_length, DftScalarInput(*ctx.inputs[1], "dft_length"));
      if (dft_length < 1) return InvalidArgument(name + ": DFT dft_length must be >= 1, got " + std::to_string(dft_length));
    }
    if (opset >= 20 && ctx.inputs.size() > 2 && ctx.inputs[2]) {
      WH_ASSIGN_OR_RETURN(axis, DftScalarInput(*ctx.inputs[2], "axis"));
    }
    const int64_t r = x.rank();
    const int64_t a = axis < 0 ? axis + r : axis;
    const int64_t axis_len = a >= 0 && a < r ? x.dims()[static_cast<size_t>(a)] : -1;
    auto s = ResolveDft(r, axis, axis_len, r > 0 ? x.dims().back() : -1, dft_length, inverse, onesided);
    if (!s.ok()) return InvalidArgument(name + ": " + s.status().message());
    Status st = DftReference(x, *s, inverse, onesided, ctx.outputs[0]);
    if (!st.ok()) return InvalidArgument(name + ": " + st.message());
    return Status::Ok();
  });
}

}  // namespace
const SignalFns kSignalFns{MakeDft};
}  // namespace reference

}  // namespace whittle
