// Reference unary kernels: math functions, activations (their formulas: kernels/common/elementwise_ops.h),
// Clip and Cast (declared in elementwise.h).
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "kernels/reference/elementwise.h"
#include "kernels/common/dtype_dispatch.h"
#include "kernels/common/elementwise_ops.h"

namespace whittle::reference {

using ew::DataAs;
using ew::Dispatch;
using ew::TypeSet;

bool UnaryAcceptsIntegers(UnaryOp op) {
  for (const ew::UnaryOpInfo& u : ew::kUnaryOps)
    if (u.op == op) return u.types == ew::UnaryTypes::kNumeric;
  return false;
}

const char* UnaryOpName(UnaryOp op) {
  if (op == UnaryOp::kGeluTanh) return "Gelu";
  for (const ew::UnaryOpInfo& u : ew::kUnaryOps)
    if (u.op == op) return u.name;
  return "?";
}

namespace {

// The integer forms of the ops that take integers (wrapping, like the arithmetic); floats take
// ew::UnaryValue.
template <class T>
T IntegerUnary(UnaryOp op, T x) {
  switch (op) {
    case UnaryOp::kNeg: return ew::WrapSub(T(0), x);
    case UnaryOp::kAbs:
      if constexpr (std::is_unsigned_v<T>) return x;
      else return x < T(0) ? ew::WrapSub(T(0), x) : x;
    case UnaryOp::kSign:
      if constexpr (std::is_unsigned_v<T>) return x > T(0) ? T(1) : T(0);
      else return x > T(0) ? T(1) : x < T(0) ? T(-1) : T(0);
    case UnaryOp::kRelu:
      if constexpr (std::is_unsigned_v<T>) return x;
      else return x > T(0) ? x : T(0);
    default: return x;
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
      for (int64_t i = 0; i < n; ++i) {
        if constexpr (ew::kIsFloat<T>) po[i] = ew::UnaryValue(op, p, px[i]);
        else po[i] = IntegerUnary(op, px[i]);
      }
      return Status::Ok();
    });
  }
  return Dispatch<TypeSet::kFloat>(x.dtype(), UnaryOpName(op), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = DataAs<T>(x);
    T* po = DataAs<T>(out);
    for (int64_t i = 0; i < n; ++i) po[i] = ew::UnaryValue(op, p, px[i]);
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
