// The contract between the element-wise glue (kernels/elementwise_kernels.cc) and its backends:
// the binary op enum (the unary ops, their parameters and formulas: kernels/common/elementwise_ops.h) and ElementwiseFns with its function types, one
// instance per backend (reference::kElementwiseFns in kernels/reference/elementwise.h,
// cpu::kElementwiseFns in kernels/cpu/elementwise.h). The names keep their namespace
// (whittle::reference), where they were declared first.
#pragma once

#include <optional>
#include <vector>

#include "kernels/common/elementwise_ops.h"
#include "lib/ir/attribute.h"
#include "lib/ir/status.h"
#include "lib/ir/tensor.h"

namespace whittle::reference {


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

namespace whittle::ew {

// The op's float attributes (kernels/common/elementwise_ops.h's kUnaryOps names them and ONNX's
// defaults) and IsInf's two flags, as every backend's kernels read them.
reference::UnaryParams ReadUnaryParams(reference::UnaryOp op, const AttributeMap& a);

}  // namespace whittle::ew
