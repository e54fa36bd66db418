// The window ops' kernel-side attributes, shared by every Conv and pooling backend (and the
// integer convs): Conv, ConvTranspose and pool attributes parsed and checked once from a
// KernelInit, the ConvTranspose kernel base and the backends' builder rows. The geometry itself
// (pads, output sizes, tap helpers) is lib/ir/window.h; the op's shape inference in lib/ops
// computes the same output sizes, kernels recompute them because they need the pads.
#pragma once

#include <utility>
#include <vector>

#include "kernels/common/fused_activation.h"
#include "kernels/common/index.h"
#include "kernels/kernel.h"
#include "lib/ir/window.h"

namespace whittle {

// Conv attributes, checked once by the family's factory: X float or double, valid window
// attributes, a fused activation only on float32.
struct ConvAttrs {
  WindowAttrs window;
  int64_t group = 1;
  FusedActivation act;
};
StatusOr<ConvAttrs> ParseConvAttrs(const KernelInit& init);

// ConvTranspose attributes (lib/ir/window.h), checked once: X float or double, valid window
// attributes, group >= 1, output_padding >= 0, output_shape > 0.
StatusOr<ConvTransposeAttrs> ParseConvTransposeAttrs(const KernelInit& init);

// Base of every backend's ConvTranspose kernel: resolves and checks the call (Y preallocated with
// the resolved size), then Run() computes.
class ConvTransposeKernelBase : public OpKernel {
 public:
  explicit ConvTransposeKernelBase(ConvTransposeAttrs a) : attrs_(std::move(a)) {}
  Status Compute(KernelContext& ctx) const final {
    const Tensor& x = *ctx.inputs[0];
    const Tensor& w = *ctx.inputs[1];
    const Tensor* b = ctx.inputs.size() > 2 ? ctx.inputs[2] : nullptr;
    ConvTransposeShape s;
    WH_RETURN_IF_ERROR(ResolveConvTransposeShape(attrs_, x, w, b, &s));
    Tensor& y = *ctx.outputs[0];
    if (y.numel() != s.batch * s.out_channels * s.geo.InSize())
      return Internal("ConvTranspose output " + DimsToString(y.dims()) + " does not match the resolved geometry");
    return Run(s, x, w, b, y, ctx.num_threads);
  }

 protected:
  virtual Status Run(const ConvTransposeShape& s, const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y,
                     int num_threads) const = 0;
  const ConvTransposeAttrs attrs_;
};

// A backend's Conv and ConvTranspose builders (nullptr, or an ok null kernel: the reference builds it).
struct ConvFns {
  KernelOr (*conv)(const ConvAttrs& a, const KernelInit& init);
  KernelOr (*conv_transpose)(const ConvTransposeAttrs& a, const KernelInit& init);
};

enum class PoolKind { kMax, kAverage, kGlobalMax, kGlobalAverage };

// Element types each pool supports.
bool PoolSupportsDType(PoolKind kind, DType t);

// Pooling attributes, checked once: supported dtype; MaxPool/AveragePool have valid window
// attributes with kernel_shape (global pools leave window empty).
struct PoolAttrs {
  PoolKind kind = PoolKind::kMax;
  WindowAttrs window;
  bool col_major_indices = false;  // MaxPool storage_order == 1
  bool count_include_pad = false;  // AveragePool
};
StatusOr<PoolAttrs> ParsePoolAttrs(PoolKind kind, const KernelInit& init);

// A backend's pool builder. `reference` is the reference backend's row: a backend kernel that
// handles only some calls (ranks, dtypes, outputs) builds its fallback from it.
struct PoolFns {
  KernelOr (*pool)(const PoolAttrs& a, const KernelInit& init, const PoolFns& reference);
};

}  // namespace whittle
