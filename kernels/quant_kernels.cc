// Kernels for QuantizeLinear / DequantizeLinear. axis exists from opset 13 (default 1); before
// that the parameters are per-tensor. The CPU kernels are bit-identical to the reference.
#include <string>

#include "kernels/cpu/quant.h"
#include "kernels/kernel.h"
#include "kernels/reference/quant.h"

namespace whittle {
namespace {

using Factory = StatusOr<std::unique_ptr<OpKernel>>;

Factory MakeQuant(const KernelInit& init, bool dequantize, bool cpu) {
  const int64_t axis = init.opset >= 13 ? init.attrs.GetInt("axis", 1) : 1;
  return std::unique_ptr<OpKernel>(MakeFnKernel([=](KernelContext& ctx) -> Status {
    const Tensor& x = *ctx.inputs[0];
    const Tensor& scale = *ctx.inputs[1];
    const Tensor* zp = ctx.inputs.size() > 2 ? ctx.inputs[2] : nullptr;
    Tensor* y = ctx.outputs[0];
    if (dequantize)
      return cpu ? DequantizeLinearCpu(x, scale, zp, axis, y, ctx.num_threads)
                 : DequantizeLinearReference(x, scale, zp, axis, y);
    return cpu ? QuantizeLinearCpu(x, scale, zp, axis, y, ctx.num_threads)
               : QuantizeLinearReference(x, scale, zp, axis, y);
  }));
}

}  // namespace

void RegisterQuantKernels(KernelRegistry& r) {
  for (bool dq : {false, true}) {
    const std::string op = dq ? "DequantizeLinear" : "QuantizeLinear";
    r.Register("", op, [dq](const KernelInit& init) { return MakeQuant(init, dq, init.backend == Backend::kCpu); });
  }
}

}  // namespace whittle
