// The byte kernel's AVX-512 VNNI tile (kernels/cpu/qgemm.h; compiled with -mavx512f -mavx512bw
// -mavx512vnni: see CMakeLists.txt, and only called where the CPU has them). A B panel's k-quad,
// 16 columns x 4 bytes, is exactly one zmm, so a tile of up to 8 rows x 2 panels keeps 16 zmm
// accumulators: per k-quad two panel loads, one 4-byte broadcast per row and 16 vpdpbusd of 64
// multiply-adds each (the ymm kernel of qgemm8.cc does 4 rows x 1 panel, 8 of 32). vpdpbusd sums
// in int32 without an int16 step, so every u8 x s8 product is exact.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/qgemm_tile.h"

namespace whittle::cpu::qgemm8_avx512vnni {


namespace {

// c += the four-byte dot products of unsigned u and signed s per int32 lane. Inline assembly:
// with the intrinsic, GCC 12 copies every accumulator to a fresh register and back around each
// vpdpbusd (and spilled two of the 16 to the stack), which cost the tile a third of its speed.
inline void Dot(__m512i& c, __m512i u, __m512i s) { asm("vpdpbusd %2, %1, %0" : "+v"(c) : "v"(u), "v"(s)); }

// Accumulators are named variables, not an array: GCC 12 keeps an array of them in memory once
// inline assembly takes its elements, and with the intrinsic it copied each one to a fresh
// register and back around every vpdpbusd.
#define WH_VNNI_ROW(r)                                                                            \
  if constexpr (R > r) {                                                                          \
    int32_t quad;                                                                                 \
    std::memcpy(&quad, ar[r] + 4 * q, sizeof(quad));                                              \
    const __m512i a = _mm512_set1_epi32(quad);                                                    \
    if constexpr (kAUnsigned) {                                                                   \
      Dot(c##r##0, a, b0);                                                                        \
      if constexpr (NP > 1) Dot(c##r##1, a, b1);                                                  \
    } else {                                                                                      \
      Dot(c##r##0, b0, a);                                                                        \
      if constexpr (NP > 1) Dot(c##r##1, b1, a);                                                  \
    }                                                                                             \
  }
#define WH_VNNI_STORE(r)                                                                          \
  if constexpr (R > r) {                                                                          \
    _mm512_storeu_si512(tile + r * ldt, c##r##0);                                                 \
    if constexpr (NP > 1) _mm512_storeu_si512(tile + r * ldt + 16, c##r##1);                      \
  }

// tile[R][NP * 16] over `segments` runs of seg_quads quads: row r's run s starts at
// a[r] + seg_off[s] (a GEMM: one run per row; an implicit-GEMM conv: one per kernel row or tap),
// and B's quads follow one another through all runs.
template <int R, int NP, bool kAUnsigned>
void Kernel(const uint8_t* const* a, const int64_t* seg_off, int64_t segments, int64_t seg_quads, const uint8_t* bp,
            int64_t panel_stride, int32_t* tile, int64_t ldt) {
  static_assert(R >= 1 && R <= 8 && NP >= 1 && NP <= 2, "tile shape");
  const __m512i z = _mm512_setzero_si512();
  __m512i c00 = z, c01 = z, c10 = z, c11 = z, c20 = z, c21 = z, c30 = z, c31 = z;
  __m512i c40 = z, c41 = z, c50 = z, c51 = z, c60 = z, c61 = z, c70 = z, c71 = z;
  for (int64_t s = 0; s < segments; ++s) {
    const uint8_t* ar[R];
    for (int r = 0; r < R; ++r) ar[r] = a[r] + seg_off[s];
    for (int64_t q = 0; q < seg_quads; ++q, bp += 64) {
      const __m512i b0 = _mm512_loadu_si512(bp);
      const __m512i b1 = NP > 1 ? _mm512_loadu_si512(bp + panel_stride) : z;
      WH_VNNI_ROW(0)
      WH_VNNI_ROW(1)
      WH_VNNI_ROW(2)
      WH_VNNI_ROW(3)
      WH_VNNI_ROW(4)
      WH_VNNI_ROW(5)
      WH_VNNI_ROW(6)
      WH_VNNI_ROW(7)
    }
  }
  WH_VNNI_STORE(0)
  WH_VNNI_STORE(1)
  WH_VNNI_STORE(2)
  WH_VNNI_STORE(3)
  WH_VNNI_STORE(4)
  WH_VNNI_STORE(5)
  WH_VNNI_STORE(6)
  WH_VNNI_STORE(7)
}
#undef WH_VNNI_ROW
#undef WH_VNNI_STORE

template <int R, bool kAUnsigned>
void ForPanels(int np, const uint8_t* const* a, const int64_t* seg_off, int64_t segments, int64_t seg_quads,
               const uint8_t* bp, int64_t panel_stride, int32_t* tile, int64_t ldt) {
  if (np == 2) Kernel<R, 2, kAUnsigned>(a, seg_off, segments, seg_quads, bp, panel_stride, tile, ldt);
  else Kernel<R, 1, kAUnsigned>(a, seg_off, segments, seg_quads, bp, panel_stride, tile, ldt);
}

template <bool kAUnsigned>
void ForRows(int rows, int np, const uint8_t* const* a, const int64_t* seg_off, int64_t segments, int64_t seg_quads,
             const uint8_t* bp, int64_t panel_stride, int32_t* tile, int64_t ldt) {
#define WH_VNNI_CASE(r) \
  case r: return ForPanels<r, kAUnsigned>(np, a, seg_off, segments, seg_quads, bp, panel_stride, tile, ldt);
  switch (rows) {
    WH_VNNI_CASE(1)
    WH_VNNI_CASE(2)
    WH_VNNI_CASE(3)
    WH_VNNI_CASE(4)
    WH_VNNI_CASE(5)
    WH_VNNI_CASE(6)
    WH_VNNI_CASE(7)
    default: return ForPanels<8, kAUnsigned>(np, a, seg_off, segments, seg_quads, bp, panel_stride, tile, ldt);
  }
#undef WH_VNNI_CASE
}

}  // namespace

void Tile(int rows, int np, bool a_unsigned, const uint8_t* ap, int64_t lda, const uint8_t* bp, int64_t panel_stride,
          int64_t kquads, int32_t* tile, int64_t ldt) {
  const uint8_t* a[kMr];
  for (int r = 0; r < rows && r < kMr; ++r) a[r] = ap + r * lda;
  const int64_t whole = 0;
  if (a_unsigned) ForRows<true>(rows, np, a, &whole, 1, kquads, bp, panel_stride, tile, ldt);
  else ForRows<false>(rows, np, a, &whole, 1, kquads, bp, panel_stride, tile, ldt);
}

void ConvBand(int64_t rows, const uint8_t* xp, const int64_t* pos, const int64_t* seg_off, int64_t segments,
              int64_t seg_quads, const uint8_t* bp, int64_t panel_stride, int np, int32_t* out, int64_t ldt) {
  for (int64_t r = 0; r < rows; r += kMr) {
    const int n = static_cast<int>(std::min<int64_t>(kMr, rows - r));
    const uint8_t* a[kMr];
    for (int i = 0; i < n; ++i) a[i] = xp + pos[r + i];
    ForRows<true>(n, np, a, seg_off, segments, seg_quads, bp, panel_stride, out + r * ldt, ldt);
  }
}

}  // namespace whittle::cpu::qgemm8_avx512vnni
