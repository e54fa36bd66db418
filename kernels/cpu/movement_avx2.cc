// The transposes' 8x8 blocks of 32-bit elements in AVX2 registers (unpacks and shuffles only, no
// arithmetic: float bits move unchanged). Compiled for AVX2 (CMakeLists.txt); movement.cc calls
// it where kernels/cpu/isa/features.h says the CPU runs it.
#include <immintrin.h>

#include "kernels/cpu/isa/kernels.h"

namespace whittle::cpu::movement_avx2 {
namespace {

// dst[j * ld_dst + i] = src[i * ld_src + j] for i, j < 8.
inline void Transpose8x8(const float* src, int64_t ld_src, float* dst, int64_t ld_dst) {
  __m256 r[8], t[8], u[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * ld_src);
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {
    _mm256_storeu_ps(dst + i * ld_dst, _mm256_permute2f128_ps(u[i], u[i + 4], 0x20));
    _mm256_storeu_ps(dst + (i + 4) * ld_dst, _mm256_permute2f128_ps(u[i], u[i + 4], 0x31));
  }
}

}  // namespace

void TransposeBlocks32(const void* src, int64_t ld_src, void* dst, int64_t ld_dst, int64_t rows, int64_t cols) {
  const float* s = static_cast<const float*>(src);
  float* d = static_cast<float*>(dst);
  for (int64_t i = 0; i < rows; i += 8)
    for (int64_t j = 0; j < cols; j += 8) Transpose8x8(s + i * ld_src + j, ld_src, d + j * ld_dst + i, ld_dst);
}

}  // namespace whittle::cpu::movement_avx2
