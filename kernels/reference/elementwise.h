// Reference element-wise kernels: plain loops over a numpy-broadcast index walk, the truth the
// fast CPU kernels are tested against. Inputs are whole tensors; `out` is preallocated with the
// dims and dtype shape inference gave (a mismatch is reported, not assumed). float16/bfloat16
// are handled by the caller (ew::RunWithHalfAsFloat) except in Cast and Where, which see them.
// Data-dependent failures (integer division by zero) come back as Status.
#pragma once

#include <optional>
#include <vector>

#include "kernels/common/elementwise_fns.h"
#include "lib/ir/status.h"
#include "lib/ir/tensor.h"

namespace whittle::reference {

bool IsCompare(BinaryOp op);
bool IsLogical(BinaryOp op);
const char* BinaryOpName(BinaryOp op);

bool UnaryAcceptsIntegers(UnaryOp op);
const char* UnaryOpName(UnaryOp op);

// out = a (op) b with numpy broadcasting. Pow accepts any numeric exponent type.
Status Binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out);
// Variadic Max/Min/Sum(kAdd)/Mean(kAdd, mean=true) over broadcast inputs.
Status Variadic(BinaryOp op, bool mean, const std::vector<const Tensor*>& inputs, Tensor& out);
// out = cond ? x : y with broadcasting over all three; any element type.
Status Where(const Tensor& cond, const Tensor& x, const Tensor& y, Tensor& out);
Status Unary(UnaryOp op, const UnaryParams& p, const Tensor& x, Tensor& out);
// Clip to [lo, hi]: a present bound tensor wins, else the attribute (opset < 11), else the type's
// limits. lo > hi gives hi everywhere, as ONNX specifies.
Status Clip(const Tensor& x, const Tensor* lo, const Tensor* hi, std::optional<float> lo_attr,
            std::optional<float> hi_attr, Tensor& out);
// Converts x to out's dtype (every numeric type, bool, float16, bfloat16).
Status Cast(const Tensor& x, Tensor& out);

extern const ElementwiseFns kElementwiseFns;

// Error when an integer divisor tensor holds a zero (Div, Mod).
Status CheckNoZeroDivisor(const Tensor& b);
// Error unless out has the dims and dtype the kernel expects.
Status CheckOutput(const Tensor& out, const Dims& dims, DType dtype);

}  // namespace whittle::reference
