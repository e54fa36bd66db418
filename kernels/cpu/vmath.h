// Vectorized float transcendental functions (exp, log, erf, tanh, sigmoid, GELU) with AVX2+FMA
// and AVX-512 paths chosen at run time by the CPU's features, one binary for both. Each path is
// its own translation unit compiled for its ISA (vmath_avx2.cc, vmath_avx512.cc); nothing else in
// the build needs those flags. The polynomials are minimax-style fits made for Whittle (see
// vmath_impl.h); the maximum errors against double-precision libm are checked in
// tests/kernels/vmath_test.cc.
#pragma once

#include <cstdint>

namespace whittle::cpu {

enum class SimdIsa { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };

// The widest ISA this CPU and OS run, capped by the environment variable
// WHITTLE_ISA=scalar|avx2|avx512 (from kernels/cpu/isa/features.h, the one feature probe).
SimdIsa ActiveSimdIsa();
// The widest ISA this CPU supports, whatever WHITTLE_ISA says.
SimdIsa CpuSimdIsa();
const char* SimdIsaName(SimdIsa isa);

enum class VFn { kExp, kLog, kErf, kTanh, kSigmoid, kGelu, kGeluTanh };

// y[i] = fn(x[i]) for i < n on the calling thread; y may equal x. GELU is x·Φ(x) with the exact
// erf (kGelu) or the tanh approximation (kGeluTanh).
void VMap(VFn fn, const float* x, float* y, int64_t n);
// The same on a given ISA (tests and benchmarks); an ISA the CPU lacks runs the widest it has.
void VMapWith(SimdIsa isa, VFn fn, const float* x, float* y, int64_t n);

// y[i] = exp(x[i] - shift) on the ISA in use, returning the sum of the y[i] (softmax rows).
float VExpShiftSum(const float* x, float* y, int64_t n, float shift);

// Peak-FLOP probe for rooflines: `iterations` rounds of independent FMA chains on the given ISA's
// widest vectors (enough chains to keep two FMA units busy). Returns a value that depends on every
// chain (so the loop is not optimized away) and sets *flops to the floating-point operations done.
float FmaLoop(SimdIsa isa, int64_t iterations, double* flops);

// Per-ISA entry points (defined in vmath_avx2.cc / vmath_avx512.cc).
namespace vmath_avx2 {
void Map(VFn fn, const float* x, float* y, int64_t n);
float FmaLoop(int64_t iterations, double* flops);
float ExpShiftSum(const float* x, float* y, int64_t n, float shift);
}  // namespace vmath_avx2
namespace vmath_avx512 {
void Map(VFn fn, const float* x, float* y, int64_t n);
float FmaLoop(int64_t iterations, double* flops);
float ExpShiftSum(const float* x, float* y, int64_t n, float shift);
}  // namespace vmath_avx512

}  // namespace whittle::cpu
