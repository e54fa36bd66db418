// Reference unary kernels: math functions, activations, Clip and Cast (declared in elementwise.h).
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "kernels/reference/elementwise.h"
#include "kernels/common/dtype_dispatch.h"

namespace whittle::reference {

using ew::DataAs;
using ew::Dispatch;
using ew::TypeSet;

bool UnaryAcceptsIntegers(UnaryOp op) { return op <= UnaryOp::kRelu; }

const char* UnaryOpName(UnaryOp op) {
  switch (op) {
    case UnaryOp::kNeg: return "Neg";
    case UnaryOp::kAbs: return "Abs";
    case UnaryOp::kSign: return "Sign";
    case UnaryOp::kRelu: return "Relu";
    case UnaryOp::kNot: return "Not";
    case UnaryOp::kSqrt: return "Sqrt";
    case UnaryOp::kExp: return "Exp";
    case UnaryOp::kLog: return "Log";
    case UnaryOp::kErf: return "Erf";
    case UnaryOp::kReciprocal: return "Reciprocal";
    case UnaryOp::kFloor: return "Floor";
    case UnaryOp::kCeil: return "Ceil";
    case UnaryOp::kRound: return "Round";
    case UnaryOp::kSin: return "Sin";
    case UnaryOp::kCos: return "Cos";
    case UnaryOp::kTan: return "Tan";
    case UnaryOp::kAsin: return "Asin";
    case UnaryOp::kAcos: return "Acos";
    case UnaryOp::kAtan: return "Atan";
    case UnaryOp::kSinh: return "Sinh";
    case UnaryOp::kCosh: return "Cosh";
    case UnaryOp::kAsinh: return "Asinh";
    case UnaryOp::kAcosh: return "Acosh";
    case UnaryOp::kAtanh: return "Atanh";
    case UnaryOp::kSigmoid: return "Sigmoid";
    case UnaryOp::kTanh: return "Tanh";
    case UnaryOp::kLeakyRelu: return "LeakyRelu";
    case UnaryOp::kElu: return "Elu";
    case UnaryOp::kSelu: return "Selu";
    case UnaryOp::kCelu: return "Celu";
    case UnaryOp::kSoftplus: return "Softplus";
    case UnaryOp::kSoftsign: return "Softsign";
    case UnaryOp::kHardSigmoid: return "HardSigmoid";
    case UnaryOp::kHardSwish: return "HardSwish";
    case UnaryOp::kThresholdedRelu: return "ThresholdedRelu";
    case UnaryOp::kShrink: return "Shrink";
    case UnaryOp::kGelu: return "Gelu";
    case UnaryOp::kGeluTanh: return "Gelu";
    case UnaryOp::kIsNaN: return "IsNaN";
    case UnaryOp::kIsInf: return "IsInf";
  }
  return "?";
}

namespace {

template <class T>
T NumericUnary(UnaryOp op, T x) {
  switch (op) {
    case UnaryOp::kNeg: return ew::WrapSub(T(0), x);
    case UnaryOp::kAbs:
      if constexpr (std::is_unsigned_v<T>) return x;
      else return x < T(0) ? ew::WrapSub(T(0), x) : x;
    case UnaryOp::kSign:
      if constexpr (ew::kIsFloat<T>) {
        if (std::isnan(x)) return x;
      }
      if constexpr (std::is_unsigned_v<T>) return x > T(0) ? T(1) : T(0);
      else return x > T(0) ? T(1) : x < T(0) ? T(-1) : T(0);
    case UnaryOp::kRelu:
      if constexpr (std::is_unsigned_v<T>) return x;
      else return x > T(0) ? x : T(0);
    default: return x;
  }
}

template <class T>
T FloatUnary(UnaryOp op, const UnaryParams& p, T x) {
  const T alpha = static_cast<T>(p.alpha), beta = static_cast<T>(p.beta);
  switch (op) {
    case UnaryOp::kSqrt: return std::sqrt(x);
    case UnaryOp::kExp: return std::exp(x);
    case UnaryOp::kLog: return std::log(x);
    case UnaryOp::kErf: return std::erf(x);
    case UnaryOp::kReciprocal: return T(1) / x;
    case UnaryOp::kFloor: return std::floor(x);
    case UnaryOp::kCeil: return std::ceil(x);
    case UnaryOp::kRound: return std::nearbyint(x);  // default rounding mode: half to even
    case UnaryOp::kSin: return std::sin(x);
    case UnaryOp::kCos: return std::cos(x);
    case UnaryOp::kTan: return std::tan(x);
    case UnaryOp::kAsin: return std::asin(x);
    case UnaryOp::kAcos: return std::acos(x);
    case UnaryOp::kAtan: return std::atan(x);
    case UnaryOp::kSinh: return std::sinh(x);
    case UnaryOp::kCosh: return std::cosh(x);
    case UnaryOp::kAsinh: return std::asinh(x);
    case UnaryOp::kAcosh: return std::acosh(x);
    case UnaryOp::kAtanh: return std::atanh(x);
    case UnaryOp::kSigmoid: {
      // Written so that exp never overflows.
      if (x >= T(0)) return T(1) / (T(1) + std::exp(-x));
      const T e = std::exp(x);
      return e / (T(1) + e);
    }
    case UnaryOp::kTanh: return std::tanh(x);
    case UnaryOp::kLeakyRelu: return x >= T(0) ? x : alpha * x;
    case UnaryOp::kElu: return x >= T(0) ? x : alpha * std::expm1(x);
    case UnaryOp::kSelu: {
      const T gamma = static_cast<T>(p.gamma);
      return x > T(0) ? gamma * x : gamma * (alpha * std::exp(x) - alpha);
    }
    case UnaryOp::kCelu: return std::max(T(0), x) + std::min(T(0), alpha * std::expm1(x / alpha));
    case UnaryOp::kSoftplus: return x > T(0) ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
    case UnaryOp::kSoftsign: return x / (T(1) + std::fabs(x));
    case UnaryOp::kHardSigmoid: return std::max(T(0), std::min(T(1), alpha * x + beta));
    case UnaryOp::kHardSwish: return x * std::max(T(0), std::min(T(1), x * static_cast<T>(1.0 / 6.0) + T(0.5)));
    case UnaryOp::kThresholdedRelu: return x > alpha ? x : T(0);
    case UnaryOp::kGelu: return T(0.5) * x * (T(1) + std::erf(x * static_cast<T>(0.70710678118654752440)));
    case UnaryOp::kGeluTanh: {
      const T k = static_cast<T>(0.79788456080286535588);  // sqrt(2 / pi)
      return T(0.5) * x * (T(1) + std::tanh(k * (x + static_cast<T>(0.044715) * x * x * x)));
    }
    case UnaryOp::kShrink: {
      const T lambd = static_cast<T>(p.lambd), bias = static_cast<T>(p.bias);
      return x < -lambd ? x + bias : x > lambd ? x - bias : T(0);
    }
    default: return NumericUnary(op, x);
  }
}

}  // namespace

Status Unary(UnaryOp op, const UnaryParams& p, const Tensor& x, Tensor& out) {
  const int64_t n = x.numel();
  if (out.numel() != n) return Internal("unary output size differs from input");
  if (op == UnaryOp::kNot) {
    if (x.dtype() != DType::kBool || out.dtype() != DType::kBool) return InvalidArgument("Not expects bool");
    const bool* px = DataAs<bool>(x);
    bool* po = DataAs<bool>(out);
    for (int64_t i = 0; i < n; ++i) po[i] = !px[i];
    return Status::Ok();
  }
  if (op == UnaryOp::kIsNaN || op == UnaryOp::kIsInf) {
    if (out.dtype() != DType::kBool) return Internal("IsNaN/IsInf output must be bool");
    return Dispatch<TypeSet::kFloat>(x.dtype(), UnaryOpName(op), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* px = DataAs<T>(x);
      bool* po = DataAs<bool>(out);
      for (int64_t i = 0; i < n; ++i) {
        const T v = px[i];
        po[i] = op == UnaryOp::kIsNaN ? std::isnan(v)
                                      : std::isinf(v) && ((v > 0 && p.detect_positive) || (v < 0 && p.detect_negative));
      }
      return Status::Ok();
    });
  }
  if (out.dtype() != x.dtype()) return Internal("unary output dtype differs from input");
  if (UnaryAcceptsIntegers(op)) {
    return Dispatch<TypeSet::kNumeric>(x.dtype(), UnaryOpName(op), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* px = DataAs<T>(x);
      T* po = DataAs<T>(out);
      for (int64_t i = 0; i < n; ++i) po[i] = NumericUnary(op, px[i]);
      return Status::Ok();
    });
  }
  return Dispatch<TypeSet::kFloat>(x.dtype(), UnaryOpName(op), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = DataAs<T>(x);
    T* po = DataAs<T>(out);
    for (int64_t i = 0; i < n; ++i) po[i] = FloatUnary(op, p, px[i]);
    return Status::Ok();
  });
}

Status Clip(const Tensor& x, const Tensor* lo, const Tensor* hi, std::optional<float> lo_attr,
            std::optional<float> hi_attr, Tensor& out) {
  if (out.dtype() != x.dtype() || out.numel() != x.numel()) return Internal("Clip output differs from input");
  for (const Tensor* b : {lo, hi}) {
    if (!b) continue;
    if (b->dtype() != x.dtype()) return InvalidArgument("Clip bounds must have the input's element type");
    if (b->numel() != 1) return InvalidArgument("Clip bounds must be scalars, got shape " + DimsToString(b->dims()));
  }
  return Dispatch<TypeSet::kNumeric>(x.dtype(), "Clip", [&](auto tag) {
    using T = typename decltype(tag)::type;
    // An absent bound does not clip at all (floats keep their infinities).
    using L = std::numeric_limits<T>;
    const T lov = lo ? DataAs<T>(*lo)[0]
                     : lo_attr ? ew::CastValue<T>(static_cast<double>(*lo_attr)) : L::has_infinity ? -L::infinity() : L::lowest();
    const T hiv = hi ? DataAs<T>(*hi)[0]
                     : hi_attr ? ew::CastValue<T>(static_cast<double>(*hi_attr)) : L::has_infinity ? L::infinity() : L::max();
    const T* px = DataAs<T>(x);
    T* po = DataAs<T>(out);
    for (int64_t i = 0; i < x.numel(); ++i) po[i] = std::min(std::max(px[i], lov), hiv);
    return Status::Ok();
  });
}

Status Cast(const Tensor& x, Tensor& out) {
  if (out.numel() != x.numel()) return Internal("Cast output size differs from input");
  return Dispatch<TypeSet::kAll>(x.dtype(), "Cast source", [&](auto st) {
    using S = typename decltype(st)::type;
    return Dispatch<TypeSet::kAll>(out.dtype(), "Cast target", [&](auto dt) {
      using D = typename decltype(dt)::type;
      const S* ps = DataAs<S>(x);
      D* pd = DataAs<D>(out);
      for (int64_t i = 0; i < x.numel(); ++i) pd[i] = ew::CastValue<D>(ps[i]);
      return Status::Ok();
    });
  });
}

}  // namespace whittle::reference
