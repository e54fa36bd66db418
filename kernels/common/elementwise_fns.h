// The contract between the element-wise glue (kernels/elementwise_kernels.cc) and its backends:
// the op enums, the activations' parameters and ElementwiseFns with its function types, one
// instance per backend (reference::kElementwiseFns in kernels/reference/elementwise.h,
// cpu::kElementwiseFns in kernels/cpu/elementwise.h). The names keep their namespace
// (whittle::reference), where they were declared first.
#pragma once

#include <optional>
#include <vector>

#include "lib/ir/status.h"
#include "lib/ir/tensor.h"

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
  kThresholdedRelu, kShrink, kGelu, kGeluTanh,
  // Floats -> bool.
  kIsNaN, kIsInf,
};

// Attribute values of the parametrised activations (ONNX names).
struct UnaryParams {
  float alpha = 0.f, beta = 0.f, gamma = 0.f, lambd = 0.f, bias = 0.f;
  bool detect_positive = true, detect_negative = true;  // IsInf
};

// The family's compute functions, one instance per backend (kernels/kernel.h BackendTable): the
// reference's and cpu::kElementwiseFns for the fast ones. `threads` is the intra-op budget a
// backend may use; a null member means "use the reference's".
using BinaryFn = Status (*)(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out, int threads);
using VariadicFn = Status (*)(BinaryOp op, bool mean, const std::vector<const Tensor*>& inputs, Tensor& out,
                              int threads);
using UnaryFn = Status (*)(UnaryOp op, const UnaryParams& p, const Tensor& x, Tensor& out, int threads);
using ClipFn = Status (*)(const Tensor& x, const Tensor* lo, const Tensor* hi, std::optional<float> lo_attr,
                          std::optional<float> hi_attr, Tensor& out, int threads);
using CastFn = Status (*)(const Tensor& x, Tensor& out, int threads);
using WhereFn = Status (*)(const Tensor& cond, const Tensor& x, const Tensor& y, Tensor& out, int threads);
struct ElementwiseFns {
  BinaryFn binary = nullptr;
  UnaryFn unary = nullptr;
  VariadicFn variadic = nullptr;
  ClipFn clip = nullptr;
  CastFn cast = nullptr;
  WhereFn where = nullptr;
};

}  // namespace whittle::reference
