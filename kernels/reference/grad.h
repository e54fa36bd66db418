// Kernels of the ai.whittle gradient ops (lib/ops/grad.cc), float32, any spatial rank up to
// kMaxSpatialDims, with Conv's and MaxPool's window geometry (lib/ir/window.h):
//   ConvGradInput: per image and group, col [K, P] = W_g^T [K, M/g] x dY_g [M/g, P], then col2im
//                  adds col into dX (K = C/g * taps, P = output positions); X is read for its dims
//   ConvGradWeight: per image and group, dW_g [M/g, K] += dY_g [M/g, P] x col^T [P, K], col the
//                  im2col of X (X itself for 1x1 windows at stride 1 without padding, where
//                  ConvGradInput's product is dX itself)
//   MaxPoolGrad:   each dY element added at its window's first maximum of X (MaxPool's choice);
//                  1-D and 2-D windows take a direct loop over the clipped window (2x2 stride 2:
//                  eight windows at a time with AVX2), other ranks a generic N-D tap loop (the
//                  same choices and order of additions: bit-identical)
//   ReluGrad:      dX = Y > 0 ? dY : 0 (Y the Relu's output), elementwise
//   AveragePoolGrad: each dY element divided by its window's divisor (AveragePool's count, with or
//                  without count_include_pad) and added to the window's taps inside X
//   GatherGrad:    dX = 0, then each dY slice added at its index along axis (repeats summed)
// Images (planes for MaxPoolGrad, blocks of 16K elements for ReluGrad from 64K elements up) are
// split over num_threads; the products are Eigen's. One
// implementation serves every backend (kGrad in kernels/grad_kernels.cc has only this row).
#pragma once

#include "kernels/common/grad_fns.h"
#include "kernels/common/window.h"

namespace whittle {

// dx: X's dims. dy must be Conv(X, W)'s output dims.
Status ConvGradInputReference(const ConvGradAttrs& a, const Tensor& dy, const Tensor& w, const Tensor& x,
                              Tensor* dx, int num_threads);
// dw: [M, C/group, kernel_shape...] (its dims give W's shape). dy must be Conv(X, W)'s output dims.
Status ConvGradWeightReference(const ConvGradAttrs& a, const Tensor& x, const Tensor& dy, Tensor* dw,
                               int num_threads);
// window.kernel_shape must be set. dy must be MaxPool(X)'s output dims; dx: X's dims.
Status MaxPoolGradReference(const WindowAttrs& a, const Tensor& x, const Tensor& dy, Tensor* dx, int num_threads);
// y, dy and dx of one shape.
Status ReluGradReference(const Tensor& y, const Tensor& dy, Tensor* dx, int num_threads);
// window.kernel_shape must be set. dy must be AveragePool(X)'s output dims; dx: X's dims.
Status AveragePoolGradReference(const WindowAttrs& a, bool count_include_pad, const Tensor& x, const Tensor& dy,
                                Tensor* dx, int num_threads);
// dy: Gather(X, indices, axis)'s output dims; dx: X's dims. Indices int32/int64, negative from the end.
Status GatherGradReference(int64_t axis, const Tensor& x, const Tensor& indices, const Tensor& dy, Tensor* dx,
                           int num_threads);

namespace reference {
extern const GradFns kGradFns;
}  // namespace reference

}  // namespace whittle
