#include "kernels/cpu/dropout.h"

#include <algorithm>
#include <cstdint>

#include "kernels/reference/shape.h"

namespace whittle::cpu {
namespace {

// MT19937 (Matsumoto & Nishimura; what std::mt19937 and numpy's RandomState compute), a block of
// 624 tempered words per Next().
class Mt19937Blocks {
 public:
  static constexpr int kN = 624, kM = 397;

  explicit Mt19937Blocks(uint32_t seed) {
    mt_[0] = seed;
    for (uint32_t i = 1; i < kN; ++i) mt_[i] = 1812433253u * (mt_[i - 1] ^ (mt_[i - 1] >> 30)) + i;
  }

  void Next(uint32_t* out) {
    Twist();
    for (int i = 0; i < kN; ++i) {
      uint32_t y = mt_[i];
      y ^= y >> 11;
      y ^= (y << 7) & 0x9d2c5680u;
      y ^= (y << 15) & 0xefc60000u;
      out[i] = y ^ (y >> 18);
    }
  }

 private:
  static uint32_t Mix(uint32_t hi, uint32_t lo, uint32_t far) {
    const uint32_t y = (hi & 0x80000000u) | (lo & 0x7fffffffu);
    return far ^ (y >> 1) ^ ((0u - (y & 1u)) & 0x9908b0dfu);
  }
  void Twist() {
    int i = 0;
    for (; i < kN - kM; ++i) mt_[i] = Mix(mt_[i], mt_[i + 1], mt_[i + kM]);
    for (; i < kN - 1; ++i) mt_[i] = Mix(mt_[i], mt_[i + 1], mt_[i + kM - kN]);
    mt_[kN - 1] = Mix(mt_[kN - 1], mt_[0], mt_[kM - 1]);
  }

  uint32_t mt_[kN];
};

class DropoutCpuKernel : public OpKernel {
 public:
  explicit DropoutCpuKernel(const DropoutAttrs& a) : attrs_(a) {}

  Status Compute(KernelContext& ctx) const override {
    DropoutCall call;
    WH_RETURN_IF_ERROR(ResolveDropoutCall(ctx, attrs_, &call));
    if (!call.training) return DropoutReference(*call.x, call.y, call.mask);
    if (call.x->dtype() != DType::kFloat32 || call.y->dtype() != DType::kFloat32)
      return Internal("the CPU Dropout kernel was built for float32");
    const uint64_t threshold = DropoutKeepThreshold(call.ratio);
    const float scale = static_cast<float>(DropoutScale(call.ratio));
    const float* x = call.x->data<float>();
    float* y = call.y->data<float>();
    bool* mask = call.mask ? call.mask->data<bool>() : nullptr;
    const int64_t n = call.x->numel();
    constexpr int64_t kPerBlock = Mt19937Blocks::kN / 2;  // two words per element
    Mt19937Blocks rng(DropoutCallSeed(attrs_));
    uint32_t words[Mt19937Blocks::kN];
    float keep[kPerBlock];
    for (int64_t start = 0; start < n; start += kPerBlock) {
      rng.Next(words);
      const int64_t len = std::min(kPerBlock, n - start);
      for (int64_t j = 0; j < len; ++j) {
        const uint64_t k = (static_cast<uint64_t>(words[2 * j] >> 5) << 26) | (words[2 * j + 1] >> 6);
        keep[j] = k >= threshold ? 1.f : 0.f;
      }
      const float* xs = x + start;
      float* ys = y + start;
      for (int64_t j = 0; j < len; ++j) ys[j] = (xs[j] * keep[j]) * scale;
      if (mask)
        for (int64_t j = 0; j < len; ++j) mask[start + j] = keep[j] != 0.f;
    }
    return Status::Ok();
  }

 private:
  DropoutAttrs attrs_;
};

KernelOr MakeDropout(const DropoutAttrs& a, const KernelInit& init) {
  if (init.input_dtypes.empty() || init.input_dtypes[0] != DType::kFloat32) return std::unique_ptr<OpKernel>();
  return std::unique_ptr<OpKernel>(std::make_unique<DropoutCpuKernel>(a));
}

}  // namespace

const DropoutFns kDropoutFns{&MakeDropout};

}  // namespace whittle::cpu
