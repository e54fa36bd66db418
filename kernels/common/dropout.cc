#include "kernels/common/dropout.h"

#include <atomic>
#include <cmath>
#include <random>
#include <string>

#include "kernels/common/dtype_dispatch.h"

namespace whittle {

StatusOr<DropoutAttrs> ParseDropoutAttrs(const KernelInit& init) {
  DropoutAttrs a;
  a.opset = init.opset;
  a.has_seed = init.attrs.Has("seed");
  a.seed = static_cast<uint32_t>(static_cast<uint64_t>(init.attrs.GetInt("seed", 0)) & 0xffffffffu);
  return a;
}

uint32_t DropoutCallSeed(const DropoutAttrs& a) {
  if (a.has_seed) return a.seed;
  static const uint64_t entropy = [] {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }();
  static std::atomic<uint64_t> calls{0};
  // splitmix64 of (entropy + call index): distinct, well-mixed seeds for concurrent calls.
  uint64_t z = entropy + 0x9E3779B97F4A7C15ull * (calls.fetch_add(1, std::memory_order_relaxed) + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return static_cast<uint32_t>((z ^ (z >> 31)) >> 32);
}

uint64_t DropoutKeepThreshold(double ratio) {
  return static_cast<uint64_t>(std::ceil(std::ldexp(ratio, 53)));
}

StatusOr<double> DropoutRatio(const Tensor* ratio) {
  if (!ratio) return 0.5;
  if (ratio->numel() != 1) return InvalidArgument("Dropout ratio must be a scalar, got shape " + DimsToString(ratio->dims()));
  double r = 0;
  switch (ratio->dtype()) {
    case DType::kFloat32: r = ratio->data<float>()[0]; break;
    case DType::kFloat64: r = ratio->data<double>()[0]; break;
    case DType::kFloat16: r = ew::HalfToFloat(static_cast<const uint16_t*>(ratio->raw_data())[0]); break;
    case DType::kBFloat16: r = ew::BFloat16ToFloat(static_cast<const uint16_t*>(ratio->raw_data())[0]); break;
    default: return InvalidArgument(std::string("Dropout ratio must be a float scalar, got ") + DTypeName(ratio->dtype()));
  }
  if (!(r >= 0.0 && r < 1.0)) return InvalidArgument("Dropout ratio must be in [0, 1), got " + std::to_string(r));
  return r;
}

StatusOr<bool> DropoutTrainingMode(const Tensor* training_mode) {
  if (!training_mode) return false;
  if (training_mode->dtype() != DType::kBool || training_mode->numel() != 1)
    return InvalidArgument("Dropout training_mode must be a bool scalar");
  return training_mode->data<bool>()[0];
}

Status ResolveDropoutCall(const KernelContext& ctx, const DropoutAttrs& a, DropoutCall* call) {
  auto in = [&](size_t i) -> const Tensor* { return i < ctx.inputs.size() ? ctx.inputs[i] : nullptr; };
  call->x = in(0);
  call->y = ctx.outputs.empty() ? nullptr : ctx.outputs[0];
  call->mask = ctx.outputs.size() > 1 ? ctx.outputs[1] : nullptr;
  call->ratio = 0.5;
  call->training = false;
  if (a.opset < 12) return Status::Ok();  // no training mode before opset 12
  WH_ASSIGN_OR_RETURN(call->ratio, DropoutRatio(in(1)));
  WH_ASSIGN_OR_RETURN(bool training, DropoutTrainingMode(in(2)));
  call->training = training && call->ratio != 0.0;
  if (call->training && call->mask && call->mask->dtype() != DType::kBool)
    return Internal("Dropout mask output was allocated as " + std::string(DTypeName(call->mask->dtype())) +
                    ", expected bool");
  return Status::Ok();
}

}  // namespace whittle
