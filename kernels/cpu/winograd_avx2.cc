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

#include "kernels/cpu/winograd_impl.h"

using K = WinogradKernels<V>;
static_assert(K::W == kWidth, "vector width");

}  // namespace

void InputTransform(const float* x, int64_t c, int64_t b, int64_t h, int64_t w, int64_t pt, int64_t pl,
                    int64_t tw, int64_t t0, int64_t tiles, float* v, int64_t vstride) {
  int64_t goff[kWinogradMaxChannels / kWidth];
  K::InputTransform(x, c, b, h, w, pt, pl, tw, t0, tiles, v, vstride, goff);
}

void Gemm16(const float* v, int64_t vstride, const float* u, int64_t c, int64_t k, int64_t tiles, float* m,
            int64_t mstride) {
  K::Gemm16(v, vstride, u, c, k, tiles, m, mstride);
}

void OutputTransform(const float* m, int64_t mstride, int64_t k, int64_t b, int64_t oh, int64_t ow, int64_t tw,
                     int64_t t0, int64_t tiles, const float* bias, const float* sum, bool relu, float* y) {
  int64_t qoff[kWinogradMaxChannels / kWidth];
  K::OutputTransform(m, mstride, k, b, oh, ow, tw, t0, tiles, bias, sum, relu, y, qoff);
}

}  // namespace whittle::cpu::winograd_avx2
