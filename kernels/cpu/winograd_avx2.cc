// winograd.h's transforms and GEMMs on AVX2 + FMA (compiled with -mavx2 -mfma -mno-avx512f: see
// CMakeLists.txt): 8 channels per vector, GEMM tiles of 12 accumulators (6 tiles x 16 channels).
#include <immintrin.h>

#include "kernels/cpu/winograd.h"

namespace whittle::cpu::winograd_avx2 {
namespace {

struct V {
  using F = __m256;
  static constexpr int kWidth = 8, kMaxAcc = 12;
  static F Zero() { return _mm256_setzero_ps(); }
  static F Load(const float* p) { return _mm256_loadu_ps(p); }
  static void Store(float* p, F v) { _mm256_storeu_ps(p, v); }
  static F Broadcast(const float* p) { return _mm256_broadcast_ss(p); }
  static F Add(F a, F b) { return _mm256_add_ps(a, b); }
  static F Sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static F Max(F a, F b) { return _mm256_max_ps(a, b); }
  static F Fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
};

}  // namespace

#include "kernels/cpu/winograd_impl.h"

}  // namespace whittle::cpu::winograd_avx2
