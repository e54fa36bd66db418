// Direct stride-1 2-D convolution (float32, NCHW) without im2col.
//
// The input of one image and group is copied once into a zero-padded buffer P[c][ph][pw]
// (ph = ih + pads, pw = iw + pads). Seen as one flat row per channel, the output position
// (oh, x) for x in [0, pw) is p = oh*pw + x, and tap (kh, kw) reads P[c][p + kh*dh*pw + kw*dw]:
// every tap is a constant shift of the same flat index, so the convolution becomes OCB x TW tiles
// of FMAs over contiguous vectors with no bounds checks (conv_direct_impl.h). The columns
// x >= ow are computed and dropped (pw - ow of every pw, e.g. 2 of 30 for a 3x3 on 28 wide).
// Work is split into (image, group, block of OCB output channels, chunk of output rows) tasks; a
// task's tiles land in a per-thread buffer laid out like the flat positions, then the epilogue
// walks its rows, adding the bias, an optional residual (Conv's fused sum input) and the fused
// activation, and writes only the valid columns.
//
// Weights are packed once at construction into [group][oc block][Cg][taps][OCB] with OCB = 8 on
// AVX-512 and 4 on AVX2 (zero rows pad the last block). Chosen per shape by measurement against
// the other paths (conv.h); applies to stride-1 2-D convs that are not depthwise on an AVX2 or
// AVX-512 CPU.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/common/window.h"
#include "kernels/cpu/vmath.h"
#include "kernels/cpu/aligned.h"

namespace whittle::cpu {

class DirectConv {
 public:
  // w: [out_channels][cg][kh][kw], out_channels split evenly over `group` groups. isa: the tile
  // kernel to use (tests); capped to what the CPU runs.
  DirectConv(const float* w, int64_t out_channels, int64_t cg, int64_t kh, int64_t kw, int64_t group,
             SimdIsa isa = ActiveSimdIsa());

  // Whether Run handles this geometry on this CPU (stride 1, 2-D, an AVX2 or AVX-512 tile kernel).
  bool Applies(const ConvShape& s) const;

  // y = act(conv(x) + bias + sum); bias and sum (the output's shape) may be null.
  void Run(const ConvShape& s, const float* x, const float* bias, const float* sum, const FusedActivation& act,
           int threads, float* y) const;

 private:
  SimdIsa isa_;
  int ocb_ = 0, tile_width_ = 0;
  int64_t out_channels_, cg_, kh_, kw_, group_, blocks_;
  AlignedVector<float> packed_;
};

// Per-ISA tiles (conv_direct_avx2.cc, conv_direct_avx512.cc): out[o * ld + i] for o < OCB, i < TW,
// from the padded input advanced to the tile's first position.
namespace conv_direct_avx2 {
// dst[i] = src[i] + bias (+ sum[i]), then max(., 0) when relu, for i < n (masked tail).
void Epilogue(float* dst, const float* src, int64_t n, float bias, const float* sum, bool relu);
constexpr int kOcBlock = 4, kTileWidth = 24;
void Tile(const float* in, int64_t cstride, int64_t icg, const int32_t* offs, int taps, const float* w, float* out,
          int64_t ld);
}  // namespace conv_direct_avx2
namespace conv_direct_avx512 {
// dst[i] = src[i] + bias (+ sum[i]), then max(., 0) when relu, for i < n (masked tail).
void Epilogue(float* dst, const float* src, int64_t n, float bias, const float* sum, bool relu);
constexpr int kOcBlock = 8, kTileWidth = 48;
void Tile(const float* in, int64_t cstride, int64_t icg, const int32_t* offs, int taps, const float* w, float* out,
          int64_t ld);
}  // namespace conv_direct_avx512

}  // namespace whittle::cpu
