// Scalar semantics of the binary element-wise ops, used by the reference kernels and by the CPU
// kernels' non-vectorised paths so that both agree on the corner cases: wrapping integer
// arithmetic, truncating integer division, Python-style Mod versus C fmod, NaN-propagating
// Max/Min, shifts past the bit width. Floats take kernels/common/elementwise_ops.h's formulas,
// which CUDA shares. Integer division by zero is rejected before these run.
#pragma once

#include <cmath>
#include <type_traits>

#include "kernels/common/dtype_dispatch.h"
#include "kernels/common/elementwise_fns.h"
#include "kernels/common/elementwise_ops.h"

namespace whittle::ew {

template <class T>
T MaxValue(T a, T b) {
  if constexpr (kIsFloat<T>) return FloatBinaryValue(reference::BinaryOp::kMax, a, b);
  else return a >= b ? a : b;
}
template <class T>
T MinValue(T a, T b) {
  if constexpr (kIsFloat<T>) return FloatBinaryValue(reference::BinaryOp::kMin, a, b);
  else return a <= b ? a : b;
}

template <class T>
T DivValue(T a, T b) {
  if constexpr (kIsInt<T>) {
    if (b == 0) return 0;
    if constexpr (std::is_signed_v<T>) {
      if (b == -1) return WrapSub(T(0), a);  // INT_MIN / -1 wraps instead of trapping
    }
    return static_cast<T>(a / b);
  } else {
    return a / b;
  }
}

// fmod: the remainder has the dividend's sign (C); otherwise the divisor's sign (Python).
template <class T>
T ModValue(T a, T b, bool fmod) {
  if constexpr (kIsInt<T>) {
    if (b == 0) return 0;
    if constexpr (std::is_signed_v<T>) {
      if (b == -1) return 0;
      T r = static_cast<T>(a % b);
      if (!fmod && r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);
      return r;
    } else {
      return static_cast<T>(a % b);
    }
  } else {
    return FloatBinaryValue(fmod ? reference::BinaryOp::kFmod : reference::BinaryOp::kMod, a, b);
  }
}

// BitShift as opset 28 defines it (earlier opsets only had unsigned types, which it agrees with):
// a signed right shift is arithmetic (sign-extending), a left shift drops the bits past the
// width, and a shift by a negative amount or by the width or more gives what the sign fill alone
// gives: -1 for a right shift of a negative value, else 0.
template <class T>
T ShiftValue(T a, T b, bool left) {
  if constexpr (kIsInt<T>) {
    using U = std::make_unsigned_t<T>;
    const U ua = static_cast<U>(a);
    const bool negative = std::is_signed_v<T> && a < T(0);
    if (b < T(0) || static_cast<U>(b) >= sizeof(T) * 8) return !left && negative ? static_cast<T>(-1) : T(0);
    const unsigned n = static_cast<unsigned>(b);
    if (left) {
      if constexpr (sizeof(T) < sizeof(unsigned)) return static_cast<T>(static_cast<U>(static_cast<unsigned>(ua) << n));
      else return static_cast<T>(static_cast<U>(ua << n));
    }
    // Right: the complement's logical shift, complemented back, fills with the sign bit.
    const U r = negative ? static_cast<U>(~static_cast<U>(static_cast<U>(~ua) >> n)) : static_cast<U>(ua >> n);
    return static_cast<T>(r);
  } else {
    return a;
  }
}

template <class T>
T ApplyArith(reference::BinaryOp op, T a, T b) {
  using reference::BinaryOp;
  if constexpr (kIsFloat<T>) {
    if (op <= BinaryOp::kPRelu) return FloatBinaryValue(op, a, b);
  }
  switch (op) {
    case BinaryOp::kAdd: return WrapAdd(a, b);
    case BinaryOp::kSub: return WrapSub(a, b);
    case BinaryOp::kMul: return WrapMul(a, b);
    case BinaryOp::kDiv: return DivValue(a, b);
    case BinaryOp::kMod: return ModValue(a, b, false);
    case BinaryOp::kFmod: return ModValue(a, b, true);
    case BinaryOp::kMax: return MaxValue(a, b);
    case BinaryOp::kMin: return MinValue(a, b);
    case BinaryOp::kPRelu:
      if constexpr (std::is_unsigned_v<T>) return a;
      else return a < T(0) ? WrapMul(a, b) : a;
    case BinaryOp::kBitShiftLeft: return ShiftValue(a, b, true);
    case BinaryOp::kBitShiftRight: return ShiftValue(a, b, false);
    case BinaryOp::kPow: return CastValue<T>(std::pow(static_cast<double>(a), static_cast<double>(b)));
    default: return a;
  }
}

template <class T>
bool ApplyCompare(reference::BinaryOp op, T a, T b) {
  using reference::BinaryOp;
  switch (op) {
    case BinaryOp::kEqual: return a == b;
    case BinaryOp::kGreater: return a > b;
    case BinaryOp::kLess: return a < b;
    case BinaryOp::kGreaterEqual: return a >= b;
    case BinaryOp::kLessEqual: return a <= b;
    default: return false;
  }
}

}  // namespace whittle::ew
