// The gradient ops' per-call checks, shared by every backend's GradFns (kernels/reference/grad.cc,
// kernels/cpu/grad.cc): float32 operands, dY of the forward output's shape, dX / dW of X's / W's
// shape; each resolves the geometry (or GatherGrad's blocks and normalised indices) the kernel
// then loops over. Messages name the op and the offending dims, the same on every backend.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/common/grad_fns.h"

namespace whittle {

// ConvGradInput(dY, W, X) -> dX: X is read for its dims only.
Status ResolveConvGradInput(const ConvGradAttrs& a, const Tensor& dy, const Tensor& w, const Tensor& x,
                            const Tensor& dx, ConvShape* s);
// ConvGradWeight(X, dY) -> dW: dW's dims are W's.
Status ResolveConvGradWeight(const ConvGradAttrs& a, const Tensor& x, const Tensor& dy, const Tensor& dw,
                             ConvShape* s);
// MaxPoolGrad / AveragePoolGrad (op names which) (X, dY) -> dX: a.kernel_shape must be set.
Status ResolvePoolGrad(const char* op, const WindowAttrs& a, const Tensor& x, const Tensor& dy, const Tensor& dx,
                       WindowGeometry* g);
// ReluGrad(Y, dY) -> dX, all of one shape.
Status CheckReluGrad(const Tensor& y, const Tensor& dy, const Tensor& dx);

// GatherGrad's call: dX viewed as [outer, n, inner] (n X's dim along axis), dY as
// [outer, idx.size(), inner]; idx the indices in order, each normalised into [0, n).
struct GatherGradShape {
  int64_t outer = 1, n = 0, inner = 1;
  std::vector<int64_t> idx;
};
Status ResolveGatherGrad(int64_t axis, const Tensor& x, const Tensor& indices, const Tensor& dy, const Tensor& dx,
                         GatherGradShape* s);

}  // namespace whittle
