#include "kernels/cpu/vmath.h"

#include <cmath>

#include "kernels/cpu/isa/features.h"

namespace whittle::cpu {
namespace {

float Scalar(VFn fn, float v) {
  switch (fn) {
    case VFn::kExp: return std::exp(v);
    case VFn::kLog: return std::log(v);
    case VFn::kErf: return std::erf(v);
    case VFn::kTanh: return std::tanh(v);
    case VFn::kSigmoid: return v >= 0.f ? 1.f / (1.f + std::exp(-v)) : std::exp(v) / (1.f + std::exp(v));
    case VFn::kGelu: return 0.5f * v * (1.f + std::erf(v * 0.70710678118654752f));
    case VFn::kGeluTanh:
      return 0.5f * v * (1.f + std::tanh(0.79788456080286536f * (v + 0.044715f * v * v * v)));
  }
  return v;
}

SimdIsa IsaOf(const IsaFeatures& f) {
  return f.avx512f && f.Avx2() ? SimdIsa::kAvx512 : f.Avx2() ? SimdIsa::kAvx2 : SimdIsa::kScalar;
}

SimdIsa Cap(SimdIsa isa) {
  return static_cast<int>(isa) <= static_cast<int>(CpuSimdIsa()) ? isa : CpuSimdIsa();
}

}  // namespace

SimdIsa CpuSimdIsa() {
  static const SimdIsa isa = IsaOf(CpuFeaturesUncapped());
  return isa;
}

SimdIsa ActiveSimdIsa() {
  static const SimdIsa isa = IsaOf(CpuFeatures());
  return isa;
}

const char* SimdIsaName(SimdIsa isa) {
  return isa == SimdIsa::kAvx512 ? "avx512" : isa == SimdIsa::kAvx2 ? "avx2" : "scalar";
}

void VMapWith(SimdIsa isa, VFn fn, const float* x, float* y, int64_t n) {
  switch (Cap(isa)) {
    case SimdIsa::kAvx512: return vmath_avx512::Map(fn, x, y, n);
    case SimdIsa::kAvx2: return vmath_avx2::Map(fn, x, y, n);
    case SimdIsa::kScalar: break;
  }
  for (int64_t i = 0; i < n; ++i) y[i] = Scalar(fn, x[i]);
}

float FmaLoop(SimdIsa isa, int64_t iterations, double* flops) {
  switch (Cap(isa)) {
    case SimdIsa::kAvx512: return vmath_avx512::FmaLoop(iterations, flops);
    case SimdIsa::kAvx2: return vmath_avx2::FmaLoop(iterations, flops);
    case SimdIsa::kScalar: break;
  }
  float acc[8] = {};
  for (int64_t i = 0; i < iterations; ++i)
    for (float& v : acc) v = v * 0.999999f + 1e-7f;
  *flops = 16.0 * static_cast<double>(iterations);
  float s = 0.f;
  for (float v : acc) s += v;
  return s;
}

void VMap(VFn fn, const float* x, float* y, int64_t n) { VMapWith(ActiveSimdIsa(), fn, x, y, n); }

float VExpShiftSum(const float* x, float* y, int64_t n, float shift) {
  switch (ActiveSimdIsa()) {
    case SimdIsa::kAvx512: return vmath_avx512::ExpShiftSum(x, y, n, shift);
    case SimdIsa::kAvx2: return vmath_avx2::ExpShiftSum(x, y, n, shift);
    case SimdIsa::kScalar: break;
  }
  float s = 0.f;
  for (int64_t i = 0; i < n; ++i) s += (y[i] = std::exp(x[i] - shift));
  return s;
}

}  // namespace whittle::cpu
