// The transforms and GEMMs of winograd.h, written once over a vector traits type V:
// winograd_avx2.cc and winograd_avx512.cc define V (in an anonymous namespace) and include this
// inside their own namespace, each compiled for its own ISA; it defines that namespace's
// InputTransform, Gemm16 and OutputTransform (declared in winograd.h). One vector holds V::kWidth consecutive channels of
// one position, which the blocked layout stores contiguously (b is a multiple of the width).
//
// V provides F, kWidth, kMaxAcc (accumulator registers a GEMM tile may hold), Zero, Load, Store,
// Broadcast (one float from memory), Add, Sub, Max and Fma.
// Included inside a namespace: it includes nothing itself (winograd.h, included first, brings
// <cstdint>).
#pragma once

namespace {

template <class V>
struct WinogradKernels {
  using F = typename V::F;
  static constexpr int W = V::kWidth;

  // acc[r][v] += A[r][i] * B[i][W v..] over i < c for R rows of A (row stride lda) and NV vectors
  // of B (row stride ldb); out[r][W v..] = acc. Every loop over R and NV is unrolled: GCC
  // otherwise keeps acc in memory (a store after every FMA).
  template <int R, int NV>
  static void Tile(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t c, float* out, int64_t ldc) {
    F acc[R][NV];
#pragma GCC unroll 32
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] = V::Zero();
    for (int64_t i = 0; i < c; ++i) {
      F bv[NV];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) bv[v] = V::Load(b + i * ldb + W * v);
#pragma GCC unroll 32
      for (int r = 0; r < R; ++r) {
        const F av = V::Broadcast(a + r * lda + i);
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) acc[r][v] = V::Fma(av, bv[v], acc[r][v]);
      }
    }
#pragma GCC unroll 32
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) V::Store(out + r * ldc + W * v, acc[r][v]);
  }

  // The last rows (< R) of a GEMM: the tile of exactly that many rows.
  template <int R, int NV>
  static void TailRows(int64_t rows, const float* a, int64_t lda, const float* b, int64_t ldb, int64_t c, float* out,
                       int64_t ldc) {
    if constexpr (R > 0) {
      if (rows == R) return Tile<R, NV>(a, lda, b, ldb, c, out, ldc);
      TailRows<R - 1, NV>(rows, a, lda, b, ldb, c, out, ldc);
    }
  }

  template <int NV>
  static void Rows(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t c, float* out, int64_t ldc,
                   int64_t rows) {
    constexpr int R = V::kMaxAcc / NV;
    int64_t r = 0;
    for (; r + R <= rows; r += R) Tile<R, NV>(a + r * lda, lda, b, ldb, c, out + r * ldc, ldc);
    if (r < rows) TailRows<R - 1, NV>(rows - r, a + r * lda, lda, b, ldb, c, out + r * ldc, ldc);
  }

  // Where each group of W channels starts in a blocked image of `positions` positions (no
  // division by the runtime block size in the tile loops).
  static void GroupOffsets(int64_t channels, int64_t b, int64_t positions, int64_t* off) {
    for (int64_t g = 0; g < channels; g += W) off[g / W] = (g / b) * positions * b + g % b;
  }

  static void InputTransform(const float* x, int64_t c, int64_t b, int64_t h, int64_t w, int64_t pt, int64_t pl,
                             int64_t tw, int64_t t0, int64_t tiles, float* v, int64_t vstride, int64_t* goff) {
    const F zero = V::Zero();
    GroupOffsets(c, b, h * w, goff);
    int64_t ti = t0 / tw, tj = t0 % tw;
    for (int64_t t = 0; t < tiles; ++t, tj = tj + 1 == tw ? (++ti, 0) : tj + 1) {
      const int64_t r0 = 2 * ti - pt, c0 = 2 * tj - pl;
      const bool inside = r0 >= 0 && r0 + 4 <= h && c0 >= 0 && c0 + 4 <= w;
      for (int64_t g = 0; g < c; g += W) {
        const float* base = x + goff[g / W];
        F d[4][4];
        if (inside) {
          for (int i = 0; i < 4; ++i)
            for (int j = 0; j < 4; ++j) d[i][j] = V::Load(base + ((r0 + i) * w + c0 + j) * b);
        } else {
          for (int i = 0; i < 4; ++i)
            for (int j = 0; j < 4; ++j) {
              const int64_t r = r0 + i, col = c0 + j;
              d[i][j] = r >= 0 && r < h && col >= 0 && col < w ? V::Load(base + (r * w + col) * b) : zero;
            }
        }
        // B^T d: rows (d0 - d2, d1 + d2, d2 - d1, d1 - d3), then the same over columns.
        F s[4][4];
        for (int j = 0; j < 4; ++j) {
          s[0][j] = V::Sub(d[0][j], d[2][j]);
          s[1][j] = V::Add(d[1][j], d[2][j]);
          s[2][j] = V::Sub(d[2][j], d[1][j]);
          s[3][j] = V::Sub(d[1][j], d[3][j]);
        }
        float* out = v + t * c + g;
        for (int i = 0; i < 4; ++i) {
          V::Store(out + (4 * i + 0) * vstride, V::Sub(s[i][0], s[i][2]));
          V::Store(out + (4 * i + 1) * vstride, V::Add(s[i][1], s[i][2]));
          V::Store(out + (4 * i + 2) * vstride, V::Sub(s[i][2], s[i][1]));
          V::Store(out + (4 * i + 3) * vstride, V::Sub(s[i][1], s[i][3]));
        }
      }
    }
  }

  static void Gemm16(const float* v, int64_t vstride, const float* u, int64_t c, int64_t k, int64_t tiles, float* m,
                     int64_t mstride) {
    for (int xi = 0; xi < 16; ++xi) {
      const float* a = v + xi * vstride;
      const float* bm = u + xi * c * k;
      float* out = m + xi * mstride;
      int64_t j = 0;
      for (; j + 2 * W <= k; j += 2 * W) Rows<2>(a, c, bm + j, k, c, out + j, k, tiles);
      if (j < k) Rows<1>(a, c, bm + j, k, c, out + j, k, tiles);
    }
  }

  static void OutputTransform(const float* m, int64_t mstride, int64_t k, int64_t b, int64_t oh, int64_t ow,
                              int64_t tw, int64_t t0, int64_t tiles, const float* bias, const float* sum, bool relu,
                              float* y, int64_t* qoff) {
    const F zero = V::Zero();
    GroupOffsets(k, b, oh * ow, qoff);
    int64_t ti = t0 / tw, tj = t0 % tw;
    for (int64_t t = 0; t < tiles; ++t, tj = tj + 1 == tw ? (++ti, 0) : tj + 1) {
      const int64_t oy = 2 * ti, ox = 2 * tj;
      const bool full = oy + 2 <= oh && ox + 2 <= ow;
      for (int64_t q = 0; q < k; q += W) {
        const float* src = m + t * k + q;
        F r[4][4];
        for (int i = 0; i < 4; ++i)
          for (int j = 0; j < 4; ++j) r[i][j] = V::Load(src + (4 * i + j) * mstride);
        // A^T r: rows (r0 + r1 + r2, r1 - r2 - r3), then the same over columns.
        F s[2][4];
        for (int j = 0; j < 4; ++j) {
          s[0][j] = V::Add(V::Add(r[0][j], r[1][j]), r[2][j]);
          s[1][j] = V::Sub(V::Sub(r[1][j], r[2][j]), r[3][j]);
        }
        const F bv = V::Load(bias + q);
        F o[2][2];
        for (int i = 0; i < 2; ++i) {
          o[i][0] = V::Add(V::Add(V::Add(s[i][0], s[i][1]), s[i][2]), bv);
          o[i][1] = V::Add(V::Sub(V::Sub(s[i][1], s[i][2]), s[i][3]), bv);
        }
        const int64_t off = qoff[q / W];
        for (int i = 0; i < 2; ++i)
          for (int j = 0; j < 2; ++j) {
            if (!full && (oy + i >= oh || ox + j >= ow)) continue;
            const int64_t at = off + ((oy + i) * ow + ox + j) * b;
            F val = o[i][j];
            if (sum) val = V::Add(val, V::Load(sum + at));
            if (relu) val = V::Max(val, zero);
            V::Store(y + at, val);
          }
      }
    }
  }
};

using Kernels = WinogradKernels<V>;
static_assert(Kernels::W == kWidth, "vector width");

}  // namespace

void InputTransform(const float* x, int64_t c, int64_t b, int64_t h, int64_t w, int64_t pt, int64_t pl,
                    int64_t tw, int64_t t0, int64_t tiles, float* v, int64_t vstride) {
  int64_t goff[kWinogradMaxChannels / kWidth];
  Kernels::InputTransform(x, c, b, h, w, pt, pl, tw, t0, tiles, v, vstride, goff);
}

void Gemm16(const float* v, int64_t vstride, const float* u, int64_t c, int64_t k, int64_t tiles, float* m,
            int64_t mstride) {
  Kernels::Gemm16(v, vstride, u, c, k, tiles, m, mstride);
}

void OutputTransform(const float* m, int64_t mstride, int64_t k, int64_t b, int64_t oh, int64_t ow, int64_t tw,
                     int64_t t0, int64_t tiles, const float* bias, const float* sum, bool relu, float* y) {
  int64_t qoff[kWinogradMaxChannels / kWidth];
  Kernels::OutputTransform(m, mstride, k, b, oh, ow, tw, t0, tiles, bias, sum, relu, y, qoff);
}
