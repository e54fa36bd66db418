// vmath.h on AVX-512F (compiled with -mavx512f -mfma: see CMakeLists.txt; only called when the
// CPU has AVX-512F).
#include "kernels/cpu/isa/avx512.h"
#include "kernels/cpu/vmath.h"

namespace whittle::cpu::vmath_avx512 {
namespace {

using VFnKind = whittle::cpu::VFn;

using V = isa::Avx512;  // kernels/cpu/isa/avx512.h

#include "kernels/cpu/vmath_impl.h"

}  // namespace

void Map(VFn fn, const float* x, float* y, int64_t n) { VMath<V>::Map(fn, x, y, n); }
float ExpShiftSum(const float* x, float* y, int64_t n, float shift) { return VMath<V>::ExpShiftSum(x, y, n, shift); }

float FmaLoop(int64_t iterations, double* flops) {
  constexpr int kChains = 12;  // > latency (4) x FMA units (2)
  V::F acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = V::Set(0.001f * static_cast<float>(c));
  const V::F a = V::Set(0.999999f), b = V::Set(1e-7f);
  for (int64_t i = 0; i < iterations; ++i)
    for (int c = 0; c < kChains; ++c) acc[c] = V::Fma(acc[c], a, b);
  V::F s = acc[0];
  for (int c = 1; c < kChains; ++c) s = V::Add(s, acc[c]);
  *flops = 2.0 * kChains * V::kWidth * static_cast<double>(iterations);
  return V::Sum(s);
}

}  // namespace whittle::cpu::vmath_avx512
