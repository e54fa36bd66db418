// The CUDA com.microsoft MatMulNBits' host side (4-bit codes; the arithmetic: kernels/cuda/
// nbits_body.h). Its weight operands are constants, as every quantizer writes them: the factory
// checks them once as the CPU's does (CheckNBitsOperands; a hostile file is left to the CPU
// factory, which names what is wrong), the session uploads them to the device once, compact as
// stored, and each call launches on those copies. Computed weights, 8-bit codes and g_idx run on
// the CPU kernel with copies.
#include <cstdint>
#include <string>

#include "kernels/common/nbits.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/nbits.h"
#include "kernels/cuda/nbits_body.h"
#include "lib/ir/domain.h"

namespace whittle::cuda {
namespace {

KernelOr MakeMatMulNBits(const KernelInit& init) {
  const NBitsAttrs a = NBitsAttrsOf(init.attrs);
  Unary act;
  if (a.bits != 4 || InputDType(init, 0) != DType::kFloat32 || !ConstInput(init, 1) || !ConstInput(init, 2) ||
      !ConstantInputs(init, {3, 5}) || InputDType(init, 4) != DType::kUndefined || !FusedKind(init.attrs, &act))
    return KernelOr(nullptr);
  auto w = CheckNBitsOperands(a, *ConstInput(init, 1), *ConstInput(init, 2), ConstInput(init, 3), nullptr,
                              ConstInput(init, 5));
  if (!w.ok()) return KernelOr(nullptr);
  NBitsArgs base;
  base.N = a.N;
  base.K = a.K;
  base.block = a.block;
  base.relu = act == Unary::kRelu;
  const bool zp_float = w->zp_float != nullptr, zp_packed = w->zp_packed != nullptr, bias = w->bias != nullptr;
  const std::string node = init.node_name;
  return Kernel([=](KernelContext& ctx) -> Status {
    const Tensor& x = *ctx.inputs[0];
    Tensor& y = *ctx.outputs[0];
    if (x.rank() < 1 || x.dims().back() != base.K)
      return InvalidArgument(node + ": A must be float32 [..., " + std::to_string(base.K) + "], got " +
                             DimsToString(x.dims()));
    NBitsArgs g = base;
    g.M = x.numel() / base.K;
    if (y.numel() != g.M * g.N) return InvalidArgument(node + ": output has the wrong size " + DimsToString(y.dims()));
    if (g.M == 0) return Status::Ok();
    g.a = x.data<float>();
    g.y = y.data<float>();
    g.b = ctx.inputs[1]->data<uint8_t>();
    g.scales = ctx.inputs[2]->data<float>();
    if (zp_float) g.zp_float = ctx.inputs[3]->data<float>();
    if (zp_packed) g.zp_packed = ctx.inputs[3]->data<uint8_t>();
    if (bias) g.bias = ctx.inputs[5]->data<float>();
    // The kernels read the codes 8 bytes at a time (rows are whole blocks of >= 8 bytes).
    if (reinterpret_cast<uintptr_t>(g.b) % 8 != 0)
      return Internal(node + ": the device copy of B is not 8-byte aligned");
    LaunchMatMulNBits(g, Stream());
    return Launched("MatMulNBits");
  });
}

}  // namespace

void RegisterNBitsKernels(KernelRegistry& r) {
  DeclareCudaKernel(r, kMicrosoftDomain, "MatMulNBits", {DType::kFloat32}, MakeMatMulNBits);
}

}  // namespace whittle::cuda
