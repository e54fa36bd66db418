// nbits_rows.h's int8 form (MatMulNBits accuracy_level 4) on AVX-512 VNNI: 64 bytes of codes (128
// weights) per step. The low nibbles (one AND) and the high nibbles (shift, AND) are already the
// unsigned bytes vpdpbusd multiplies by the signed int8 activations, so a code costs no float
// conversion: per 64 bytes of codes two vpdpbusd, then one int-to-float conversion and one FMA
// per row of A for the 16 lanes, each lane scaled by its block's activation and weight scales.
// Compiled -mavx512f -mavx512bw -mavx512vl -mavx512vnni -mfma (CMakeLists.txt).
#include <immintrin.h>

#include <algorithm>

#include "kernels/cpu/isa/avx512.h"
#include "kernels/cpu/nbits_rows.h"

namespace whittle::cpu::nbits_avx512vnni {
namespace {

// MR rows of A times NR rows of codes (from row r0).
template <int MR, int NR>
void Tile(const NBitsQ8Args& x, int64_t r0, float* out, int64_t ldo) {
  const int64_t rb = x.row_bytes, nb = x.nb, bb = x.block / 2, chunks = (rb + 63) / 64;
  const int64_t per_chunk = bb >= 64 ? 1 : 64 / bb;  // blocks a chunk of 64 code bytes spans
  // Lane l (code bytes 4l..4l+3 of a chunk) belongs to the chunk's block l * 4 / bb.
  const __m512i lane_block = bb >= 64 ? _mm512_setzero_si512()
                                      : _mm512_srlv_epi32(_mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 32, 36, 40,
                                                                            44, 48, 52, 56, 60),
                                                          _mm512_set1_epi32(bb == 8 ? 3 : bb == 16 ? 4 : 5));
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  const uint8_t* b = x.b + r0 * rb;
  const float* s = x.scales + r0 * nb;
  __m512 tot[MR][NR];
  for (int m = 0; m < MR; ++m)
    for (int r = 0; r < NR; ++r) tot[m][r] = _mm512_setzero_ps();
  const char* ahead = reinterpret_cast<const char*>(b + 2 * NR * rb);
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t off = c * 64, j0 = off / bb, nblocks = std::min(per_chunk, nb - j0);
    const __mmask64 bytes = off + 64 <= rb ? ~__mmask64{0} : (__mmask64{1} << (rb - off)) - 1;
    const __mmask16 blocks = static_cast<__mmask16>((1u << nblocks) - 1);
    for (int r = 0; r < NR; ++r) _mm_prefetch(ahead + r * rb + off, _MM_HINT_T0);
    for (int r = 0; r < NR; ++r) {
      const __m512i v = _mm512_maskz_loadu_epi8(bytes, b + r * rb + off);
      const __m512i lo = _mm512_and_si512(v, low4);
      const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
      const __m512 sw = _mm512_permutexvar_ps(lane_block, _mm512_maskz_loadu_ps(blocks, s + r * nb + j0));
      for (int m = 0; m < MR; ++m) {
        const int8_t* qa = x.qa + m * x.lda + c * 128;
        __m512i acc = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, _mm512_loadu_si512(qa));
        acc = _mm512_dpbusd_epi32(acc, hi, _mm512_loadu_si512(qa + 64));
        const __m512 sa = _mm512_loadu_ps(x.sa_lanes + m * x.ldsa + c * 16);
        tot[m][r] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(acc), sa), sw, tot[m][r]);
      }
    }
  }
  for (int m = 0; m < MR; ++m)
    for (int r = 0; r < NR; ++r) {
      // sum_j scales[j] * zp[j] * asum[j], asum[j] = sa[j] * (sum of the block's int8 activations).
      const int64_t n = r0 + r;
      const float* asum = x.asum + m * nb;
      __m512 z = _mm512_setzero_ps();
      for (int64_t j = 0; j < nb; j += 16) {
        const __mmask16 k = static_cast<__mmask16>(nb - j >= 16 ? 0xFFFF : (1u << (nb - j)) - 1);
        const __m512 zp = x.zp8 ? _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(k, x.zp8 + n * nb + j)))
                          : x.zf ? _mm512_maskz_loadu_ps(k, x.zf + n * nb + j)
                                 : _mm512_set1_ps(x.zdefault);
        z = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(k, x.scales + n * nb + j), zp),
                            _mm512_maskz_loadu_ps(k, asum + j), z);
      }
      out[m * ldo + r] = isa::Avx512::Sum(tot[m][r]) - isa::Avx512::Sum(z);
    }
}

template <int MR, int NR>
void Rows(const NBitsQ8Args& x, float* out, int64_t ldo) {
  int64_t r = 0;
  for (; r + NR <= x.rows; r += NR) Tile<MR, NR>(x, r, out + r, ldo);
  for (; r < x.rows; ++r) Tile<MR, 1>(x, r, out + r, ldo);
}

}  // namespace

void DotRowsQ8(const NBitsQ8Args& x, float* out, int64_t ldo) {
  switch (x.mr) {
    case 1: return Rows<1, 4>(x, out, ldo);
    case 2: return Rows<2, 2>(x, out, ldo);
    case 3: return Rows<3, 1>(x, out, ldo);
    default: return Rows<4, 1>(x, out, ldo);
  }
}

}  // namespace whittle::cpu::nbits_avx512vnni
