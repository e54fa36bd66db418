// The reference kernels of the ai.whittle gradient ops (lib/ops/grad.cc), float32, any spatial rank
// up to kMaxSpatialDims, plain single-threaded loops (num_threads is ignored) that the CPU row
// (kernels/cpu/grad.h) is tested against: the Conv grads add every product of the forward Conv
// into its place (in double), MaxPoolGrad adds dY at its window's first maximum of X, AveragePoolGrad
// dY / divisor at each tap inside X, GatherGrad each dY slice at its index, ReluGrad dY where Y > 0.
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
