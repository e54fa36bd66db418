// The contract between the gradient ops' glue (kernels/grad_kernels.cc) and its backends:
// ConvGrad's attributes and GradFns, one instance per backend (reference::kGradFns in
// kernels/reference/grad.h, cpu::kGradFns in kernels/cpu/grad.h; the per-call checks they share
// in kernels/common/grad_shape.h).
#pragma once

#include "kernels/common/window.h"

namespace whittle {

struct ConvGradAttrs {
  WindowAttrs window;
  int64_t group = 1;
};

// The family's compute functions, one instance per backend (kernels/kernel.h BackendTable).
struct GradFns {
  Status (*conv_grad_input)(const ConvGradAttrs& a, const Tensor& dy, const Tensor& w, const Tensor& x, Tensor* dx,
                            int num_threads) = nullptr;
  Status (*conv_grad_weight)(const ConvGradAttrs& a, const Tensor& x, const Tensor& dy, Tensor* dw,
                             int num_threads) = nullptr;
  Status (*max_pool_grad)(const WindowAttrs& a, const Tensor& x, const Tensor& dy, Tensor* dx,
                          int num_threads) = nullptr;
  Status (*relu_grad)(const Tensor& y, const Tensor& dy, Tensor* dx, int num_threads) = nullptr;
  Status (*average_pool_grad)(const WindowAttrs& a, bool count_include_pad, const Tensor& x, const Tensor& dy,
                              Tensor* dx, int num_threads) = nullptr;
  Status (*gather_grad)(int64_t axis, const Tensor& x, const Tensor& indices, const Tensor& dy, Tensor* dx,
                        int num_threads) = nullptr;
};

}  // namespace whittle
