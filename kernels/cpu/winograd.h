// Winograd F(2x2, 3x3) convolution on the blocked channel layout ([N, C/b, H, W, b], b a
// multiple of 8: nChw8c on AVX2 CPUs, NHWC as b = C), for 3x3 stride-1 undilated group-1 convs.
//
// Each 2x2 output tile is A^T [ (G g G^T) (.) (B^T d B) ] A over the 4x4 input tile d around it
// (Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks", 2015): 16 products per
// tile, input channel and output channel instead of the direct convolution's 36, for the price of
// the input transform (per input channel) and the output transform (per output channel). The 16
// element-wise products over channels are 16 small GEMMs [tiles x C] x [C x K]. The weights are
// transformed once at construction (in double, then rounded), so per call the work is:
//   for each (image, band of tile rows) -- the unit handed to threads --
//     input transform  -> V[16][tiles][C]   (8 channels per vector, out-of-image taps are 0)
//     16 GEMMs         -> M[16][tiles][K]   (register tiles of 6 tiles x 16 output channels)
//     output transform -> y, with bias, the fused residual sum and the activation.
// Which tile a thread computes never changes its arithmetic, so the floats do not depend on the
// thread count. Rounding differs from the direct convolution (the transforms add and subtract
// inputs before the products): errors stay at a few float32 ulps of the operands' magnitudes.
//
// The kernels are per ISA (winograd_impl.h: 8 channels per vector on AVX2 + FMA, 16 on AVX-512),
// the widest this CPU runs (capped by WHITTLE_ISA) chosen at construction; Applies() is false on
// CPUs without AVX2 and for any other geometry. WHITTLE_WINOGRAD=0 turns the path off (for
// measuring it against oneDNN).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/common/fused_activation.h"
#include "kernels/common/window.h"
#include "kernels/cpu/vmath.h"
#include "kernels/cpu/aligned.h"

namespace whittle::cpu {

class WinogradConv {
 public:
  // w: [K][C][3][3] (C = in_channels, K = out_channels), bias: [K] or null. isa: the kernels to
  // use (tests), capped to what the CPU runs.
  WinogradConv(const float* w, const float* bias, int64_t out_channels, int64_t in_channels,
               SimdIsa isa = ActiveSimdIsa());

  // Whether the geometry and this CPU take the path: 2-D 3x3, stride 1, dilation 1, group 1,
  // C and K multiples of the vector width (8 or 16 channels) and at most kWinogradMaxChannels, the
  // layout's block b a multiple of the width dividing C and K (b = 0: NHWC, the block is C on the
  // input and K on the output), and WHITTLE_WINOGRAD not 0.
  bool Applies(const ConvShape& s, int64_t block) const;

  // Whether to take this path for s rather than oneDNN's convolution: a fixed rule from
  // tests/bench/conv_bench.cc (BM_BlockedConv3x3Relu), not a timing, so every process computes
  // the same floats. With the AVX2 kernels always (1.2-1.8x oneDNN's AVX2 kernel on every shape
  // measured); with the AVX-512 ones where C * K >= 512, the 2x2 tiles waste at most 10 % of
  // their outputs and an image has at least 32 of them (a 16->16 conv is transform-bound and a 7x7
  // image pads its tiles to 8x8: oneDNN's brgemm wins both at batch 64; an 8x8 image's 16 tiles do
  // not pay for streaming the transformed weights: oneDNN wins 256->256 by a third at batch 1).
  bool Preferred(const ConvShape& s) const;

  // y = act(conv(x) + bias + sum) on blocked tensors with block b (input and output alike, 0 for
  // NHWC; sum, may be null, has y's shape and layout).
  void Run(const ConvShape& s, int64_t block, const float* x, const float* sum, const FusedActivation& act,
           int threads, float* y) const;

  // Whether this process's Winograd path is on (CPU has AVX2 + FMA, WHITTLE_WINOGRAD is not 0).
  static bool Enabled();

  // Channels per vector of the kernels this object runs (8: AVX2, 16: AVX-512).
  int64_t width() const { return width_; }

 private:
  int64_t k_, c_, width_;
  AlignedVector<float> u_;     // [16][C][K]: the transformed weights
  std::vector<float> bias_;  // [K], zeros when the conv has none
};

// Channel counts up to kWinogradMaxChannels (WinogradConv::Applies checks): past 256 channels a chunk's
// V and M and a GEMM panel of U outgrow the caches this blocking assumes.
constexpr int64_t kWinogradMaxChannels = 256;

// The per-ISA kernels (winograd_impl.h), kWidth channels per vector:
// InputTransform: V[xi * vstride + t * C + c] for the 4x4 input tiles of `tiles` consecutive
//   tiles starting at tile `t0` of a (th x tw)-tiled image (tile (i, j) reads rows 2i - pt..,
//   columns 2j - pl..); x: one image, blocked [C/b][H][W][b].
// Gemm16: M[xi] = V[xi] [tiles x C] * U[xi] [C x K] for xi < 16.
// OutputTransform: y tiles (2x2 each, clipped to oh x ow) from M, plus bias and sum, then
//   max(., 0) when relu; y and sum: one image, blocked [K/b][oh][ow][b].
#define WHITTLE_WINOGRAD_ISA(ns, width)                                                                       \
  namespace ns {                                                                                            \
  constexpr int64_t kWidth = width;                                                                         \
  void InputTransform(const float* x, int64_t c, int64_t b, int64_t h, int64_t w, int64_t pt, int64_t pl,    \
                      int64_t tw, int64_t t0, int64_t tiles, float* v, int64_t vstride);                    \
  void Gemm16(const float* v, int64_t vstride, const float* u, int64_t c, int64_t k, int64_t tiles, float* m, \
              int64_t mstride);                                                                             \
  void OutputTransform(const float* m, int64_t mstride, int64_t k, int64_t b, int64_t oh, int64_t ow,        \
                       int64_t tw, int64_t t0, int64_t tiles, const float* bias, const float* sum, bool relu, \
                       float* y);                                                                           \
  }
WHITTLE_WINOGRAD_ISA(winograd_avx2, 8)
WHITTLE_WINOGRAD_ISA(winograd_avx512, 16)
#undef WHITTLE_WINOGRAD_ISA

}  // namespace whittle::cpu
