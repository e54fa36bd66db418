// Kernels for QuantizeLinear / DequantizeLinear. axis exists from opset 13 (default 1); before
// that the parameters are per-tensor. The factory picks init.backend's compute function from
// kQuant; the CPU kernels are bit-identical to the reference.
#include <algorithm>
#include <string>

#include "kernels/cpu/lookup.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/quant.h"
#include "kernels/kernel.h"
#include "kernels/reference/quant.h"

namespace whittle {
namespace {

const BackendTable<QuantFns> kQuant{{Backend::kReference, &reference::kQuantFns}, {Backend::kCpu, &cpu::kQuantFns}};

KernelOr MakeQuant(const KernelInit& init, bool dequantize) {
  const int64_t axis = init.opset >= 13 ? init.attrs.GetInt("axis", 1) : 1;
  const int64_t block = dequantize ? init.attrs.GetInt("block_size", 0) : 0;
  const bool four_bit = !init.input_dtypes.empty() && IsPacked4Bit(init.input_dtypes[0]);
  if (block > 0 || four_bit) {
    // Blocked parameters and 4-bit inputs (opset 21): the plain loop on every host backend; the
    // runtime runs the DequantizeLinear -> MatMul of weights as MatMulNBits instead
    // (runtime/rewrite/fuse_nbits.h), so this path only serves other readers.
    return WrapFnKernel([axis, block](KernelContext& ctx) -> Status {
      const Tensor* zp = ctx.inputs.size() > 2 ? ctx.inputs[2] : nullptr;
      return DequantizeBlockedReference(*ctx.inputs[0], *ctx.inputs[1], zp, axis, block, ctx.outputs[0]);
    });
  }
  const QuantizeLinearFn fn = kQuant.Pick(init.backend, dequantize ? &QuantFns::dequantize : &QuantFns::quantize);
  return WrapFnKernel([axis, fn](KernelContext& ctx) -> Status {
    const Tensor& x = *ctx.inputs[0];
    const Tensor& scale = *ctx.inputs[1];
    const Tensor* zp = ctx.inputs.size() > 2 ? ctx.inputs[2] : nullptr;
    return fn(x, scale, zp, axis, ctx.outputs[0], ctx.num_threads);
  });
}

// The checks of Lookup's operands every backend's kernel makes.
Status CheckLookup(const Tensor& x, const Tensor& table, const Tensor& y) {
  if (x.dtype() != DType::kUInt8 && x.dtype() != DType::kInt8)
    return InvalidArgument(std::string("Lookup input must be int8 or uint8, got ") + DTypeName(x.dtype()));
  if (table.numel() != 256 || table.dtype() != y.dtype())
    return InvalidArgument("Lookup table must hold 256 values of the output's type");
  return Status::Ok();
}

// y[i] = table[byte of x[i]] for a table of bytes or floats, by the plain loop
// (kernels/reference/quant.h; a CUDA session falls back to the CPU one, but the runtime makes
// Lookup nodes only for the host backends).
KernelOr MakeLookupReference(const KernelInit&) {
  return WrapFnKernel([](KernelContext& ctx) -> Status {
    WH_RETURN_IF_ERROR(CheckLookup(*ctx.inputs[0], *ctx.inputs[1], *ctx.outputs[0]));
    return LookupReference(*ctx.inputs[0], *ctx.inputs[1], ctx.outputs[0]);
  });
}

// The same by the CPU lookups (kernels/cpu/lookup.h), in blocks over the threads.
KernelOr MakeLookupCpu(const KernelInit&) {
  return WrapFnKernel([](KernelContext& ctx) -> Status {
    const Tensor& x = *ctx.inputs[0];
    const Tensor& table = *ctx.inputs[1];
    Tensor& y = *ctx.outputs[0];
    WH_RETURN_IF_ERROR(CheckLookup(x, table, y));
    const uint8_t* xb = static_cast<const uint8_t*>(x.raw_data());
    const int64_t n = x.numel();
    // Blocks of 4096 elements over the threads, each through the CPU lookup for the table's type.
    auto blocks = [&](auto lookup, const auto* t, auto* out) {
      ParallelFor((n + 4095) / 4096, n >= (1 << 16) ? ctx.num_threads : 1, [&](int64_t b) {
        const int64_t i0 = b * 4096;
        lookup(xb + i0, std::min<int64_t>(4096, n - i0), t, out + i0);
      });
    };
    if (DTypeSize(table.dtype()) == 1) {
      blocks(cpu::LookupBytes, static_cast<const uint8_t*>(table.raw_data()), static_cast<uint8_t*>(y.raw_data()));
    } else if (table.dtype() == DType::kFloat32) {
      blocks(cpu::LookupFloats, table.data<float>(), y.data<float>());
    } else {
      return InvalidArgument(std::string("Lookup table type ") + DTypeName(table.dtype()) + " is not supported");
    }
    return Status::Ok();
  });
}

}  // namespace

void RegisterQuantKernels(KernelRegistry& r) {
  const std::vector<DType> bytes = {DType::kUInt8, DType::kInt8};
  r.Add(DeclareKernel(Backend::kReference, kWhittleDomain, "Lookup", bytes, MakeLookupReference));
  r.Add(DeclareKernel(Backend::kCpu, kWhittleDomain, "Lookup", bytes, MakeLookupCpu));
  DeclareFamily(r, kQuant, &QuantFns::quantize, "", "QuantizeLinear", {DType::kFloat32}, [](const KernelInit& init) { return MakeQuant(init, false); });
  DeclareFamily(r, kQuant, &QuantFns::dequantize, "", "DequantizeLinear", {DType::kUInt8, DType::kInt8, DType::kInt32, DType::kUInt4, DType::kInt4}, [](const KernelInit& init) { return MakeQuant(init, true); });
}

}  // namespace whittle
