// winograd.h's transforms and GEMMs on AVX-512 (compiled with -mavx512f -mfma: see
// CMakeLists.txt): 16 channels per vector, GEMM tiles of 24 accumulators (12 tiles x 32 channels).
#include <immintrin.h>

#include "kernels/cpu/winograd.h"

namespace whittle::cpu::winograd_avx512 {
namespace {

struct V {
  using F = __m512;
  static constexpr int kWidth = 16, kMaxAcc = 24;
  static F Zero() { return _mm512_setzero_ps(); }
  static F Load(const float* p) { return _mm512_loadu_ps(p); }
  static void Store(float* p, F v) { _mm512_storeu_ps(p, v); }
  static F Broadcast(const float* p) { return _mm512_set1_ps(*p); }
  static F Add(F a, F b) { return _mm512_add_ps(a, b); }
  static F Sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F Max(F a, F b) { return _mm512_max_ps(a, b); }
  static F Fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
};

}  // namespace

#include "kernels/cpu/winograd_impl.h"

}  // namespace whittle::cpu::winograd_avx512
