// The element-wise ops' formulas, each written once. A unary op: its ONNX name, the element types
// it takes, its float attributes with ONNX's defaults (kUnaryOps), and its formula (UnaryValue); a
// binary op on floats: FloatBinaryValue (integers: kernels/common/elementwise_scalar.h). They are
// WH_HD functions (kernels/common/hd.h), so the reference kernels, the CPU kernels' scalar paths
// and the CUDA kernels compute the same thing. A new unary op is an enum value, a row of kUnaryOps
// and a case of UnaryValue here, then its schema and gradient rule in lib/ops (docs/adding-an-op.md).
#pragma once

#include <cmath>

#include "kernels/common/hd.h"

namespace whittle::reference {

enum class BinaryOp {
  // Arithmetic: output has input 0's dtype.
  kAdd, kSub, kMul, kDiv, kPow, kMod, kFmod, kMax, kMin, kPRelu, kBitShiftLeft, kBitShiftRight,
  // Comparisons: output bool.
  kEqual, kGreater, kLess, kGreaterEqual, kLessEqual,
  // Logical (bool inputs): output bool.
  kAnd, kOr, kXor,
};

enum class UnaryOp {
  // Numeric types (integers and floats).
  kNeg, kAbs, kSign, kRelu,
  // bool -> bool.
  kNot,
  // Floats only.
  kSqrt, kExp, kLog, kErf, kReciprocal, kFloor, kCeil, kRound,
  kSin, kCos, kTan, kAsin, kAcos, kAtan, kSinh, kCosh, kAsinh, kAcosh, kAtanh,
  kSigmoid, kTanh, kLeakyRelu, kElu, kSelu, kCelu, kSoftplus, kSoftsign, kHardSigmoid, kHardSwish,
  kThresholdedRelu, kShrink, kGelu, kGeluTanh, kMish,
  // Floats -> bool.
  kIsNaN, kIsInf,
};

// Attribute values of the parametrised activations (ONNX names).
struct UnaryParams {
  float alpha = 0.f, beta = 0.f, gamma = 0.f, lambd = 0.f, bias = 0.f;
  bool detect_positive = true, detect_negative = true;  // IsInf
};

}  // namespace whittle::reference

namespace whittle::ew {

using reference::UnaryOp;
using reference::UnaryParams;

// The element types an op takes: numeric (integers too), floats, bool to bool, floats to bool.
enum class UnaryTypes { kNumeric, kFloat, kBool, kFloatToBool };

// A float attribute of an op and ONNX's default for it (name null: none).
struct UnaryAttr {
  const char* name = nullptr;
  float value = 0.f;
};

struct UnaryOpInfo {
  const char* name;  // the op type (ai.onnx)
  UnaryOp op;
  UnaryTypes types;
  UnaryAttr attrs[2];
};

// Every unary op the backends declare by name (Gelu's tanh form, kGeluTanh, is the Gelu op with
// approximate="tanh"; IsInf's integer attributes are read by the glue).
inline constexpr UnaryOpInfo kUnaryOps[] = {
    {"Neg", UnaryOp::kNeg, UnaryTypes::kNumeric, {}},
    {"Abs", UnaryOp::kAbs, UnaryTypes::kNumeric, {}},
    {"Sign", UnaryOp::kSign, UnaryTypes::kNumeric, {}},
    {"Relu", UnaryOp::kRelu, UnaryTypes::kNumeric, {}},
    {"Not", UnaryOp::kNot, UnaryTypes::kBool, {}},
    {"Sqrt", UnaryOp::kSqrt, UnaryTypes::kFloat, {}},
    {"Exp", UnaryOp::kExp, UnaryTypes::kFloat, {}},
    {"Log", UnaryOp::kLog, UnaryTypes::kFloat, {}},
    {"Erf", UnaryOp::kErf, UnaryTypes::kFloat, {}},
    {"Reciprocal", UnaryOp::kReciprocal, UnaryTypes::kFloat, {}},
    {"Floor", UnaryOp::kFloor, UnaryTypes::kFloat, {}},
    {"Ceil", UnaryOp::kCeil, UnaryTypes::kFloat, {}},
    {"Round", UnaryOp::kRound, UnaryTypes::kFloat, {}},
    {"Sin", UnaryOp::kSin, UnaryTypes::kFloat, {}},
    {"Cos", UnaryOp::kCos, UnaryTypes::kFloat, {}},
    {"Tan", UnaryOp::kTan, UnaryTypes::kFloat, {}},
    {"Asin", UnaryOp::kAsin, UnaryTypes::kFloat, {}},
    {"Acos", UnaryOp::kAcos, UnaryTypes::kFloat, {}},
    {"Atan", UnaryOp::kAtan, UnaryTypes::kFloat, {}},
    {"Sinh", UnaryOp::kSinh, UnaryTypes::kFloat, {}},
    {"Cosh", UnaryOp::kCosh, UnaryTypes::kFloat, {}},
    {"Asinh", UnaryOp::kAsinh, UnaryTypes::kFloat, {}},
    {"Acosh", UnaryOp::kAcosh, UnaryTypes::kFloat, {}},
    {"Atanh", UnaryOp::kAtanh, UnaryTypes::kFloat, {}},
    {"Sigmoid", UnaryOp::kSigmoid, UnaryTypes::kFloat, {}},
    {"Tanh", UnaryOp::kTanh, UnaryTypes::kFloat, {}},
    {"LeakyRelu", UnaryOp::kLeakyRelu, UnaryTypes::kFloat, {{"alpha", 0.01f}}},
    {"Elu", UnaryOp::kElu, UnaryTypes::kFloat, {{"alpha", 1.f}}},
    {"Selu", UnaryOp::kSelu, UnaryTypes::kFloat, {{"alpha", 1.67326319217681884765625f}, {"gamma", 1.05070102214813232421875f}}},
    {"Celu", UnaryOp::kCelu, UnaryTypes::kFloat, {{"alpha", 1.f}}},
    {"Softplus", UnaryOp::kSoftplus, UnaryTypes::kFloat, {}},
    {"Softsign", UnaryOp::kSoftsign, UnaryTypes::kFloat, {}},
    {"HardSigmoid", UnaryOp::kHardSigmoid, UnaryTypes::kFloat, {{"alpha", 0.2f}, {"beta", 0.5f}}},
    {"HardSwish", UnaryOp::kHardSwish, UnaryTypes::kFloat, {}},
    {"ThresholdedRelu", UnaryOp::kThresholdedRelu, UnaryTypes::kFloat, {{"alpha", 1.f}}},
    {"Shrink", UnaryOp::kShrink, UnaryTypes::kFloat, {{"lambd", 0.5f}, {"bias", 0.f}}},
    {"Gelu", UnaryOp::kGelu, UnaryTypes::kFloat, {}},
    {"Mish", UnaryOp::kMish, UnaryTypes::kFloat, {}},
    {"IsNaN", UnaryOp::kIsNaN, UnaryTypes::kFloatToBool, {}},
    {"IsInf", UnaryOp::kIsInf, UnaryTypes::kFloatToBool, {}},
};

// std::min / std::max (which device code cannot call): the first operand when the comparison is
// false, so a NaN second operand gives the first.
template <class T>
WH_HD_INLINE T Lesser(T a, T b) {
  return b < a ? b : a;
}
template <class T>
WH_HD_INLINE T Greater(T a, T b) {
  return a < b ? b : a;
}

// The formulas the activations share with fused epilogues (kernels/cuda, kernels/cpu/vmath.h's
// vector forms approximate the same functions).
template <class T>
WH_HD_INLINE T Sigmoid(T x) {  // written so that exp never overflows
  if (x >= T(0)) return T(1) / (T(1) + std::exp(-x));
  const T e = std::exp(x);
  return e / (T(1) + e);
}
template <class T>
WH_HD_INLINE T Softplus(T x) {
  return x > T(0) ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
}
template <class T>
WH_HD_INLINE T Softsign(T x) {
  return x / (T(1) + std::fabs(x));
}
template <class T>
WH_HD_INLINE T HardSigmoid(T x, T alpha, T beta) {
  return Greater(T(0), Lesser(T(1), alpha * x + beta));
}
template <class T>
WH_HD_INLINE T Gelu(T x) {
  return T(0.5) * x * (T(1) + std::erf(x * static_cast<T>(0.70710678118654752440)));
}
template <class T>
WH_HD_INLINE T GeluTanh(T x) {
  const T k = static_cast<T>(0.79788456080286535588);  // sqrt(2 / pi)
  return T(0.5) * x * (T(1) + std::tanh(k * (x + static_cast<T>(0.044715) * x * x * x)));
}

// y = op(x) for a float x (T float or double; integers go through the reference's wrapping
// forms). Not, IsNaN and IsInf change the element type and are not here.
template <class T>
WH_HD_INLINE T UnaryValue(UnaryOp op, const UnaryParams& p, T x) {
  const T alpha = static_cast<T>(p.alpha), beta = static_cast<T>(p.beta);
  switch (op) {
    case UnaryOp::kNeg: return -x;
    case UnaryOp::kAbs: return std::fabs(x);
    case UnaryOp::kSign: return x != x ? x : x > T(0) ? T(1) : x < T(0) ? T(-1) : T(0);
    case UnaryOp::kRelu: return x > T(0) ? x : T(0);
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
    case UnaryOp::kSigmoid: return Sigmoid(x);
    case UnaryOp::kTanh: return std::tanh(x);
    case UnaryOp::kLeakyRelu: return x >= T(0) ? x : alpha * x;
    case UnaryOp::kElu: return x >= T(0) ? x : alpha * std::expm1(x);
    case UnaryOp::kSelu: {
      const T gamma = static_cast<T>(p.gamma);
      return x > T(0) ? gamma * x : gamma * (alpha * std::exp(x) - alpha);
    }
    case UnaryOp::kCelu: return Greater(T(0), x) + Lesser(T(0), alpha * std::expm1(x / alpha));
    case UnaryOp::kSoftplus: return Softplus(x);
    case UnaryOp::kSoftsign: return Softsign(x);
    case UnaryOp::kHardSigmoid: return HardSigmoid(x, alpha, beta);
    case UnaryOp::kHardSwish: return x * HardSigmoid(x, static_cast<T>(1.0 / 6.0), T(0.5));
    case UnaryOp::kThresholdedRelu: return x > alpha ? x : T(0);
    case UnaryOp::kShrink: {
      const T lambd = static_cast<T>(p.lambd), bias = static_cast<T>(p.bias);
      return x < -lambd ? x + bias : x > lambd ? x - bias : T(0);
    }
    case UnaryOp::kGelu: return Gelu(x);
    case UnaryOp::kGeluTanh: return GeluTanh(x);
    case UnaryOp::kMish: return x * std::tanh(Softplus(x));
    default: return x;
  }
}

// a op b of floats (T float or double), with the CPU's semantics: Max/Min keep a NaN first
// operand, Pow in double, Mod (Python's sign) and Fmod (C's) by fmod.
template <class T>
WH_HD_INLINE T FloatBinaryValue(reference::BinaryOp op, T a, T b) {
  using reference::BinaryOp;
  switch (op) {
    case BinaryOp::kAdd: return a + b;
    case BinaryOp::kSub: return a - b;
    case BinaryOp::kMul: return a * b;
    case BinaryOp::kDiv: return a / b;
    case BinaryOp::kPow: return static_cast<T>(std::pow(static_cast<double>(a), static_cast<double>(b)));
    case BinaryOp::kMax: return (a >= b || a != a) ? a : b;
    case BinaryOp::kMin: return (a <= b || a != a) ? a : b;
    case BinaryOp::kPRelu: return a < T(0) ? a * b : a;
    case BinaryOp::kMod:
    case BinaryOp::kFmod: {
      T r = std::fmod(a, b);
      if (op == BinaryOp::kMod && r != T(0) && ((r < T(0)) != (b < T(0)))) r += b;
      if (op == BinaryOp::kMod && r == T(0)) r = std::copysign(T(0), b);  // a zero takes the divisor's sign
      return r;
    }
    default: return a;
  }
}

}  // namespace whittle::ew
