// Kernels for QuantizeLinear / DequantizeLinear. axis exists from opset 13 (default 1); before
// that the parameters are per-tensor. The factory picks init.backend's compute function from
// kQuant; the CPU kernels are bit-identical to the reference.
#include <string>

#include "kernels/cpu/quant.h"
#include "kernels/kernel.h"
#include "kernels/reference/quant.h"

namespace whittle {
namespace {

const BackendTable<QuantFns> kQuant{{Backend::kReference, &reference::kQuantFns}, {Backend::kCpu, &cpu::kQuantFns}};

KernelOr MakeQuant(const KernelInit& init, bool dequantize) {
  const int64_t axis = init.opset >= 13 ? init.attrs.GetInt("axis", 1) : 1;
  const QuantizeLinearFn fn = kQuant.Pick(init.backend, dequantize ? &QuantFns::dequantize : &QuantFns::quantize);
  return WrapFnKernel([axis, fn](KernelContext& ctx) -> Status {
    const Tensor& x = *ctx.inputs[0];
    const Tensor& scale = *ctx.inputs[1];
    const Tensor* zp = ctx.inputs.size() > 2 ? ctx.inputs[2] : nullptr;
    return fn(x, scale, zp, axis, ctx.outputs[0], ctx.num_threads);
  });
}

}  // namespace

void RegisterQuantKernels(KernelRegistry& r) {
  r.Register("", "QuantizeLinear", [](const KernelInit& init) { return MakeQuant(init, false); });
  r.Register("", "DequantizeLinear", [](const KernelInit& init) { return MakeQuant(init, true); });
}

}  // namespace whittle
