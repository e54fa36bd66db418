#include "kernels/reference/dropout.h"

#include <random>
#include <string>

#include "kernels/common/dtype_dispatch.h"
#include "kernels/reference/shape.h"

namespace whittle::reference {
namespace {

// numpy's legacy random_sample: 27 + 26 bits of two consecutive 32-bit draws.
double NextUniform(std::mt19937& rng) {
  const uint32_t a = static_cast<uint32_t>(rng()) >> 5, b = static_cast<uint32_t>(rng()) >> 6;
  return (a * 67108864.0 + b) / 9007199254740992.0;
}

template <class T, class Load, class Store>
void DropoutTrainRef(const DropoutCall& call, uint32_t seed, Load load, Store store) {
  std::mt19937 rng(seed);
  const T* x = static_cast<const T*>(call.x->raw_data());
  T* y = static_cast<T*>(call.y->raw_data());
  bool* mask = call.mask ? call.mask->data<bool>() : nullptr;
  const double scale = DropoutScale(call.ratio);
  for (int64_t i = 0; i < call.x->numel(); ++i) {
    const bool keep = NextUniform(rng) >= call.ratio;
    // (X * mask) * scale as onnx.reference: a dropped NaN or inf stays NaN, a dropped -x is -0.
    y[i] = store((load(x[i]) * (keep ? 1 : 0)) * static_cast<decltype(load(x[i]))>(scale));
    if (mask) mask[i] = keep;
  }
}

class DropoutReferenceKernel : public OpKernel {
 public:
  explicit DropoutReferenceKernel(const DropoutAttrs& a) : attrs_(a) {}

  Status Compute(KernelContext& ctx) const override {
    DropoutCall call;
    WH_RETURN_IF_ERROR(ResolveDropoutCall(ctx, attrs_, &call));
    if (!call.training) return DropoutReference(*call.x, call.y, call.mask);
    const uint32_t seed = DropoutCallSeed(attrs_);
    switch (call.x->dtype()) {
      case DType::kFloat32:
        DropoutTrainRef<float>(call, seed, [](float v) { return v; }, [](float v) { return v; });
        return Status::Ok();
      case DType::kFloat64:
        DropoutTrainRef<double>(call, seed, [](double v) { return v; }, [](double v) { return v; });
        return Status::Ok();
      case DType::kFloat16:
        DropoutTrainRef<uint16_t>(call, seed, [](uint16_t v) { return ew::HalfToFloat(v); },
                                  [](float v) { return ew::DoubleToHalf(v); });
        return Status::Ok();
      case DType::kBFloat16:
        DropoutTrainRef<uint16_t>(call, seed, [](uint16_t v) { return ew::BFloat16ToFloat(v); },
                                  [](float v) { return ew::FloatToBFloat16(v); });
        return Status::Ok();
      default:
        return Unimplemented(std::string("Dropout in training mode supports float, double, float16 and bfloat16, got ") +
                             DTypeName(call.x->dtype()));
    }
  }

 private:
  DropoutAttrs attrs_;
};

KernelOr MakeDropout(const DropoutAttrs& a, const KernelInit&) {
  return std::unique_ptr<OpKernel>(std::make_unique<DropoutReferenceKernel>(a));
}

}  // namespace

const DropoutFns kDropoutFns{&MakeDropout};

}  // namespace whittle::reference
