// winograd.h's transforms and GEMMs on AVX2 + FMA (compiled with -mavx2 -mfma -mno-avx512f: see
// CMakeLists.txt). One __m256 holds 8 consecutive channels of one position, which the blocked
// layout stores contiguously (b is a multiple of 8).
#include <immintrin.h>

#include "kernels/cpu/winograd.h"

namespace whittle::cpu::winograd_avx2 {
namespace {

// acc[r][v] += A[r][c] * B[c][8v..8v+7] over c < C for R rows of A (row stride lda) and NV
// vectors of B (row stride ldb); C[r][8v..] = acc.
template <int R, int NV>
void Tile(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t c, float* out, int64_t ldc) {
  // Every loop over R and NV unrolled: GCC otherwise keeps acc in memory (a store per FMA).
  __m256 acc[R][NV];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm256_setzero_ps();
  for (int64_t i = 0; i < c; ++i) {
    __m256 bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = _mm256_loadu_ps(b + i * ldb + 8 * v);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 av = _mm256_broadcast_ss(a + r * lda + i);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm256_fmadd_ps(av, bv[v], acc[r][v]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) _mm256_storeu_ps(out + r * ldc + 8 * v, acc[r][v]);
}

template <int NV>
void Rows(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t c, float* out, int64_t ldc,
          int64_t rows) {
  int64_t r = 0;
  for (; r + 6 <= rows; r += 6) Tile<6, NV>(a + r * lda, lda, b, ldb, c, out + r * ldc, ldc);
  switch (rows - r) {
    case 5: Tile<5, NV>(a + r * lda, lda, b, ldb, c, out + r * ldc, ldc); break;
    case 4: Tile<4, NV>(a + r * lda, lda, b, ldb, c, out + r * ldc, ldc); break;
    case 3: Tile<3, NV>(a + r * lda, lda, b, ldb, c, out + r * ldc, ldc); break;
    case 2: Tile<2, NV>(a + r * lda, lda, b, ldb, c, out + r * ldc, ldc); break;
    case 1: Tile<1, NV>(a + r * lda, lda, b, ldb, c, out + r * ldc, ldc); break;
    default: break;
  }
}

// Where each group of 8 channels starts in a blocked image of `positions` positions (no division
// by the runtime block size in the tile loops).
void GroupOffsets(int64_t channels, int64_t b, int64_t positions, int64_t* off) {
  for (int64_t g = 0; g < channels; g += 8) off[g / 8] = (g / b) * positions * b + g % b;
}

}  // namespace

void InputTransform(const float* x, int64_t c, int64_t b, int64_t h, int64_t w, int64_t pt, int64_t pl,
                    int64_t tw, int64_t t0, int64_t tiles, float* v, int64_t vstride) {
  const __m256 zero = _mm256_setzero_ps();
  int64_t goff[kMaxGroups];
  GroupOffsets(c, b, h * w, goff);
  int64_t ti = t0 / tw, tj = t0 % tw;
  for (int64_t t = 0; t < tiles; ++t, tj = tj + 1 == tw ? (++ti, 0) : tj + 1) {
    const int64_t r0 = 2 * ti - pt, c0 = 2 * tj - pl;
    const bool inside = r0 >= 0 && r0 + 4 <= h && c0 >= 0 && c0 + 4 <= w;
    for (int64_t g = 0; g < c; g += 8) {
      const float* base = x + goff[g / 8];
      __m256 d[4][4];
      if (inside) {
        for (int i = 0; i < 4; ++i)
          for (int j = 0; j < 4; ++j) d[i][j] = _mm256_loadu_ps(base + ((r0 + i) * w + c0 + j) * b);
      } else {
        for (int i = 0; i < 4; ++i)
          for (int j = 0; j < 4; ++j) {
            const int64_t r = r0 + i, col = c0 + j;
            d[i][j] = r >= 0 && r < h && col >= 0 && col < w ? _mm256_loadu_ps(base + (r * w + col) * b) : zero;
          }
      }
      // B^T d: rows (d0 - d2, d1 + d2, d2 - d1, d1 - d3), then the same over columns.
      __m256 s[4][4];
      for (int j = 0; j < 4; ++j) {
        s[0][j] = _mm256_sub_ps(d[0][j], d[2][j]);
        s[1][j] = _mm256_add_ps(d[1][j], d[2][j]);
        s[2][j] = _mm256_sub_ps(d[2][j], d[1][j]);
        s[3][j] = _mm256_sub_ps(d[1][j], d[3][j]);
      }
      float* out = v + t * c + g;
      for (int i = 0; i < 4; ++i) {
        _mm256_storeu_ps(out + (4 * i + 0) * vstride, _mm256_sub_ps(s[i][0], s[i][2]));
        _mm256_storeu_ps(out + (4 * i + 1) * vstride, _mm256_add_ps(s[i][1], s[i][2]));
        _mm256_storeu_ps(out + (4 * i + 2) * vstride, _mm256_sub_ps(s[i][2], s[i][1]));
        _mm256_storeu_ps(out + (4 * i + 3) * vstride, _mm256_sub_ps(s[i][1], s[i][3]));
      }
    }
  }
}

void Gemm16(const float* v, int64_t vstride, const float* u, int64_t c, int64_t k, int64_t tiles, float* m,
            int64_t mstride) {
  for (int xi = 0; xi < 16; ++xi) {
    const float* a = v + xi * vstride;
    const float* bm = u + xi * c * k;
    float* out = m + xi * mstride;
    int64_t j = 0;
    for (; j + 16 <= k; j += 16) Rows<2>(a, c, bm + j, k, c, out + j, k, tiles);
    if (j < k) Rows<1>(a, c, bm + j, k, c, out + j, k, tiles);
  }
}

void OutputTransform(const float* m, int64_t mstride, int64_t k, int64_t b, int64_t oh, int64_t ow, int64_t tw,
                     int64_t t0, int64_t tiles, const float* bias, const float* sum, bool relu, float* y) {
  const __m256 zero = _mm256_setzero_ps();
  int64_t qoff[kMaxGroups];
  GroupOffsets(k, b, oh * ow, qoff);
  int64_t ti = t0 / tw, tj = t0 % tw;
  for (int64_t t = 0; t < tiles; ++t, tj = tj + 1 == tw ? (++ti, 0) : tj + 1) {
    const int64_t oy = 2 * ti, ox = 2 * tj;
    const bool full = oy + 2 <= oh && ox + 2 <= ow;
    for (int64_t q = 0; q < k; q += 8) {
      const float* src = m + t * k + q;
      __m256 r[4][4];
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) r[i][j] = _mm256_loadu_ps(src + (4 * i + j) * mstride);
      // A^T r: rows (r0 + r1 + r2, r1 - r2 - r3), then the same over columns.
      __m256 s[2][4];
      for (int j = 0; j < 4; ++j) {
        s[0][j] = _mm256_add_ps(_mm256_add_ps(r[0][j], r[1][j]), r[2][j]);
        s[1][j] = _mm256_sub_ps(_mm256_sub_ps(r[1][j], r[2][j]), r[3][j]);
      }
      const __m256 bv = _mm256_loadu_ps(bias + q);
      __m256 o[2][2];
      for (int i = 0; i < 2; ++i) {
        o[i][0] = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(s[i][0], s[i][1]), s[i][2]), bv);
        o[i][1] = _mm256_add_ps(_mm256_sub_ps(_mm256_sub_ps(s[i][1], s[i][2]), s[i][3]), bv);
      }
      const int64_t off = qoff[q / 8];
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) {
          if (!full && (oy + i >= oh || ox + j >= ow)) continue;
          const int64_t at = off + ((oy + i) * ow + ox + j) * b;
          __m256 val = o[i][j];
          if (sum) val = _mm256_add_ps(val, _mm256_loadu_ps(sum + at));
          if (relu) val = _mm256_max_ps(val, zero);
          _mm256_storeu_ps(y + at, val);
        }
    }
  }
}

}  // namespace whittle::cpu::winograd_avx2
