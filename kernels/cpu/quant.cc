#include "kernels/cpu/quant.h"

#include <algorithm>
#include <limits>
#include <string>
#include <type_traits>

#include "kernels/common/quant_params.h"
#include "kernels/cpu/movement.h"

namespace whittle {
namespace {

// Elements per parallel work unit; below 4 units the loop runs on the calling thread.
constexpr int64_t kChunk = int64_t{1} << 14;

template <class X, class Q>
void QuantizeRun(const X* __restrict x, int64_t n, float scale, int32_t zero, Q* __restrict y) {
  // Clamp to [qmin - zp, qmax - zp] first: those bounds are integers, so clamp-then-round equals
  // round-then-saturate, and the rounding below only sees |v| <= 2^9.
  const float lo = static_cast<float>(std::numeric_limits<Q>::min() - zero);
  const float hi = static_cast<float>(std::numeric_limits<Q>::max() - zero);
  // Adding and subtracting 1.5 * 2^23 rounds to nearest-even in the default rounding mode,
  // exactly like nearbyint, but vectorizes everywhere.
  constexpr float kMagic = 12582912.0f;
  for (int64_t i = 0; i < n; ++i) {
    float v = static_cast<float>(x[i]) / scale;
    v = v == v ? v : 0.f;  // NaN quantizes to the zero point
    v = v < lo ? lo : v;
    v = v > hi ? hi : v;
    v = (v + kMagic) - kMagic;
    y[i] = static_cast<Q>(static_cast<int32_t>(v) + zero);
  }
}

template <class X>
void DequantizeRun(const X* __restrict x, int64_t n, float scale, int64_t zero, float* __restrict y) {
  using Wide = std::conditional_t<(sizeof(X) < 4), int32_t, int64_t>;  // int32 x needs 64-bit x - zp
  const Wide z = static_cast<Wide>(zero);
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(static_cast<Wide>(x[i]) - z) * scale;
}

// Splits [outer, channels, inner] into units of at most kChunk elements with one scale each and
// calls run(offset, count, channel) for each, in parallel when there are enough units.
template <class Fn>
void ForEachBlock(const QuantLayout& l, int threads, Fn run) {
  const int64_t per_block = std::max<int64_t>(1, (l.inner + kChunk - 1) / kChunk);
  const int64_t units = l.outer * l.channels * per_block;
  ParallelChunks(units, threads, units >= 4, [&](int64_t b, int64_t e) {
    for (int64_t u = b; u < e; ++u) {
      const int64_t block = u / per_block, part = u % per_block;
      const int64_t begin = part * kChunk, count = std::min(kChunk, l.inner - begin);
      if (count > 0) run(block * l.inner + begin, count, block % l.channels);
    }
  });
}

template <class X, class Q>
void QuantizeAll(const Tensor& x, const QuantLayout& l, const Tensor& scale, const Tensor* zp, Tensor* y,
                 int threads) {
  const X* px = x.data<X>();
  Q* py = y->data<Q>();
  const float* s = scale.data<float>();
  ForEachBlock(l, threads, [&](int64_t off, int64_t n, int64_t c) {
    QuantizeRun<X, Q>(px + off, n, s[c], static_cast<int32_t>(ZeroPointAt(zp, c)), py + off);
  });
}

template <class X>
Status QuantizeFrom(const Tensor& x, const QuantLayout& l, const Tensor& scale, const Tensor* zp, Tensor* y,
                    int threads) {
  if (y->dtype() == DType::kUInt8) QuantizeAll<X, uint8_t>(x, l, scale, zp, y, threads);
  else if (y->dtype() == DType::kInt8) QuantizeAll<X, int8_t>(x, l, scale, zp, y, threads);
  else return InvalidArgument(std::string("QuantizeLinear output must be uint8 or int8, got ") + DTypeName(y->dtype()));
  return Status::Ok();
}

template <class X>
void DequantizeAll(const Tensor& x, const QuantLayout& l, const Tensor& scale, const Tensor* zp, Tensor* y,
                   int threads) {
  const X* px = x.data<X>();
  float* py = y->data<float>();
  const float* s = scale.data<float>();
  ForEachBlock(l, threads,
               [&](int64_t off, int64_t n, int64_t c) { DequantizeRun<X>(px + off, n, s[c], ZeroPointAt(zp, c), py + off); });
}

}  // namespace

Status QuantizeLinearCpu(const Tensor& x, const Tensor& scale, const Tensor* zp, int64_t axis, Tensor* y,
                         int threads) {
  WH_ASSIGN_OR_RETURN(QuantLayout l, ResolveQuantLayout(x, scale, zp, axis));
  if (zp && zp->dtype() != y->dtype()) return InvalidArgument("zero_point type differs from the output type");
  if (x.dtype() == DType::kFloat32) return QuantizeFrom<float>(x, l, scale, zp, y, threads);
  if (x.dtype() == DType::kInt32) return QuantizeFrom<int32_t>(x, l, scale, zp, y, threads);
  return InvalidArgument(std::string("QuantizeLinear input must be float32 or int32, got ") + DTypeName(x.dtype()));
}

Status DequantizeLinearCpu(const Tensor& x, const Tensor& scale, const Tensor* zp, int64_t axis, Tensor* y,
                           int threads) {
  WH_ASSIGN_OR_RETURN(QuantLayout l, ResolveQuantLayout(x, scale, zp, axis));
  if (zp && zp->dtype() != x.dtype()) return InvalidArgument("zero_point type differs from the input type");
  switch (x.dtype()) {
    case DType::kUInt8: DequantizeAll<uint8_t>(x, l, scale, zp, y, threads); break;
    case DType::kInt8: DequantizeAll<int8_t>(x, l, scale, zp, y, threads); break;
    case DType::kInt32: DequantizeAll<int32_t>(x, l, scale, zp, y, threads); break;
    default:
      return InvalidArgument(std::string("DequantizeLinear input must be uint8, int8 or int32, got ") +
                             DTypeName(x.dtype()));
  }
  return Status::Ok();
}

namespace cpu {
const QuantFns kQuantFns{QuantizeLinearCpu, DequantizeLinearCpu};
}  // namespace cpu

}  // namespace whittle
