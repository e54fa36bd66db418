// The CUDA block-circulant layer (ai.whittle BlockCirculantMatMul; convention in
// lib/ir/circulant_format.h) as bodies (kernels/cuda/hd.h) around cuFFT: block (p, q) times x_q is
// a circular convolution, so with H = B/2 + 1 bins, Y_p[f] = sum_q C_pq[f] X_q[f] and
// y_p = irfft(Y_p). Per call: rows of x padded to Q blocks of B (pad), one batched real-to-complex
// FFT over the M*Q blocks, the bin products (bins: one thread per (row, p, bin), summing over q),
// one batched complex-to-real FFT over the M*P output blocks, and the epilogue (out: crop to N,
// + bias, Relu). The blocks' spectra C_pq, with 1/B folded in (both FFTs are unnormalized), are
// computed once at load (CirculantSpectra, in double). Interleaved complex: float pairs (re, im).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cuda/hd.h"
#ifndef __CUDACC__
#include "lib/ir/circulant_format.h"
#endif

namespace whittle::cuda {

struct CircShape {
  int64_t M = 0, N = 0, K = 0, B = 0, P = 0, Q = 0;
  WH_HD int64_t H() const { return B / 2 + 1; }
};

#ifndef __CUDACC__
// A layer's shape from its attributes (M, the rows, is per call; host code only).
inline CircShape CircShapeOf(const CirculantAttrs& a) {
  CircShape c;
  c.N = a.n;
  c.K = a.k;
  c.B = a.block;
  c.P = a.p();
  c.Q = a.q();
  return c;
}
#endif

// xp [M][Q][B] from x [M][K], zero past K. i < M * Q * B.
WH_HD void CircPadAt(const float* x, float* xp, const CircShape& c, int64_t i) {
  const int64_t m = i / (c.Q * c.B), r = i % (c.Q * c.B);
  xp[i] = r < c.K ? x[m * c.K + r] : 0.f;
}

// yf[m][p][f] = sum_q cf[p][q][f] * xf[m][q][f] (complex). i < M * P * H.
WH_HD void CircBinAt(const float* cf, const float* xf, float* yf, const CircShape& c, int64_t i) {
  const int64_t H = c.H(), f = i % H, p = (i / H) % c.P, m = i / (H * c.P);
  float re = 0.f, im = 0.f;
  for (int64_t q = 0; q < c.Q; ++q) {
    const float* a = cf + ((p * c.Q + q) * H + f) * 2;
    const float* b = xf + ((m * c.Q + q) * H + f) * 2;
    re += a[0] * b[0] - a[1] * b[1];
    im += a[0] * b[1] + a[1] * b[0];
  }
  yf[i * 2] = re;
  yf[i * 2 + 1] = im;
}

// y[m][n] = yp[m][n] (yp [M][P*B]) + bias[n], Relu when asked. i < M * N.
WH_HD void CircOutAt(const float* yp, const float* bias, bool relu, float* y, const CircShape& c, int64_t i) {
  const int64_t m = i / c.N, n = i % c.N;
  const float v = yp[m * c.P * c.B + n] + (bias ? bias[n] : 0.f);
  y[i] = relu && !(v > 0.f) ? 0.f : v;
}

// ------------------------------------------------------------------------------------------------
// Host side.

// The blocks' spectra [P][Q][H] interleaved, times 1/B: C[f] = sum_j c[j] e^{-2 pi i f j / B}.
inline std::vector<float> CirculantSpectra(const float* blocks, int64_t P, int64_t Q, int64_t B) {
  const int64_t H = B / 2 + 1;
  std::vector<double> cs(static_cast<size_t>(B)), sn(static_cast<size_t>(B));
  const double pi = 3.14159265358979323846;
  for (int64_t t = 0; t < B; ++t) {
    cs[static_cast<size_t>(t)] = std::cos(2 * pi * static_cast<double>(t) / static_cast<double>(B));
    sn[static_cast<size_t>(t)] = std::sin(2 * pi * static_cast<double>(t) / static_cast<double>(B));
  }
  std::vector<float> out(static_cast<size_t>(P * Q * H * 2));
  for (int64_t b = 0; b < P * Q; ++b)
    for (int64_t f = 0; f < H; ++f) {
      double re = 0, im = 0;
      for (int64_t j = 0; j < B; ++j) {
        const size_t t = static_cast<size_t>((f * j) % B);
        re += blocks[b * B + j] * cs[t];
        im -= blocks[b * B + j] * sn[t];
      }
      out[static_cast<size_t>((b * H + f) * 2)] = static_cast<float>(re / static_cast<double>(B));
      out[static_cast<size_t>((b * H + f) * 2 + 1)] = static_cast<float>(im / static_cast<double>(B));
    }
  return out;
}

// What a backend launches: the bodies over their ranges, and the batched FFTs (count transforms
// of length B, contiguous: real blocks B apart, spectra H apart; unnormalized, forward
// e^{-2 pi i f j / B}). An FFT returns false when it could not run.
struct CLaunches {
  virtual ~CLaunches() = default;
  virtual void Pad(const float* x, float* xp, const CircShape& c) = 0;
  virtual bool R2C(const float* in, float* out, int64_t B, int64_t count) = 0;
  virtual void Bins(const float* cf, const float* xf, float* yf, const CircShape& c) = 0;
  virtual bool C2R(float* in, float* out, int64_t B, int64_t count) = 0;
  virtual void Out(const float* yp, const float* bias, bool relu, float* y, const CircShape& c) = 0;
};

// Floats of scratch per row of x.
inline int64_t CircScratchPerRow(const CircShape& c) { return (c.Q + c.P) * (c.B + 2 * c.H()); }

// The padded rows take a whole number of 64-float lines, so the complex spectra after them start
// 256-byte aligned: cuFFT refuses a cufftComplex pointer that is not 8-byte aligned (an odd
// M * Q * B put xf on a 4-byte boundary; seen on an H100).
constexpr int64_t kCircAlignFloats = 64;
inline int64_t CircAlignUp(int64_t n) { return (n + kCircAlignFloats - 1) / kCircAlignFloats * kCircAlignFloats; }
// Scratch floats RunCirculant needs for `chunk` rows.
inline int64_t CircScratchFloats(const CircShape& c, int64_t chunk) {
  return chunk * CircScratchPerRow(c) + kCircAlignFloats;
}

// y [rows][N] from x [rows][K], `chunk` rows at a time, with CircScratchFloats(c, chunk) floats of
// scratch (cudaMalloc-aligned). False when an FFT failed.
inline bool RunCirculant(CLaunches& L, CircShape c, const float* cf, const float* bias, bool relu, const float* x,
                         int64_t rows, int64_t chunk, float* y, float* scratch) {
  for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
    c.M = std::min(chunk, rows - r0);
    float* xp = scratch;
    float* xf = xp + CircAlignUp(c.M * c.Q * c.B);
    float* yf = xf + c.M * c.Q * c.H() * 2;
    float* yp = yf + c.M * c.P * c.H() * 2;
    L.Pad(x + r0 * c.K, xp, c);
    if (!L.R2C(xp, xf, c.B, c.M * c.Q)) return false;
    L.Bins(cf, xf, yf, c);
    if (!L.C2R(yf, yp, c.B, c.M * c.P)) return false;
    L.Out(yp, bias, relu, y + r0 * c.N, c);
  }
  return true;
}

}  // namespace whittle::cuda
