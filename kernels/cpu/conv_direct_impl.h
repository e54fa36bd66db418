// The inner block of the direct convolution (conv_direct.h), written once over a vector traits
// type V, and the per-ISA Tile entry point conv_direct.h declares: conv_direct_avx2.cc and
// conv_direct_avx512.cc define V and include this inside their own namespace, each compiled for
// its own ISA (the template stays in an anonymous namespace).
//
// One call computes an OCB x (NV * V::kWidth) tile of the stride-1 convolution on the padded,
// flattened input (conv_direct.h explains the layout): for every input channel and every tap the
// NV input vectors at `p0 + tap offset` are loaded once and multiplied into OCB accumulator rows
// with that tap's broadcast weights, so the tile stays in registers for the whole reduction.
#pragma once

#include <cstdint>

namespace {

template <class V, int OCB, int NV>
struct DirectConvTile {
  static constexpr int kTileWidth = NV * V::kWidth;

  // in: padded input of the group (channel stride cstride) advanced to p0; w: packed weights
  // [icg][taps][OCB]; out: OCB rows of kTileWidth floats, ld apart.
  static void Run(const float* in, int64_t cstride, int64_t icg, const int32_t* offs, int taps, const float* w,
                  float* out, int64_t ld) {
    using F = typename V::F;
    F acc[OCB][NV];
#pragma GCC unroll 16
    for (int o = 0; o < OCB; ++o)
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[o][v] = V::Zero();
    for (int64_t c = 0; c < icg; ++c, in += cstride) {
      for (int t = 0; t < taps; ++t, w += OCB) {
        const float* src = in + offs[t];
        F x[NV];
#pragma GCC unroll 8
        for (int v = 0; v < NV; ++v) x[v] = V::Load(src + v * V::kWidth);
#pragma GCC unroll 16
        for (int o = 0; o < OCB; ++o) {
          const F wv = V::Set(w[o]);
#pragma GCC unroll 8
          for (int v = 0; v < NV; ++v) acc[o][v] = V::Fma(wv, x[v], acc[o][v]);
        }
      }
    }
#pragma GCC unroll 16
    for (int o = 0; o < OCB; ++o)
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) V::Store(out + o * ld + v * V::kWidth, acc[o][v]);
  }
};

}  // namespace

void Tile(const float* in, int64_t cstride, int64_t icg, const int32_t* offs, int taps, const float* w, float* out,
          int64_t ld) {
  static_assert(DirectConvTile<V, kOcBlock, 3>::kTileWidth == kTileWidth, "tile width");
  DirectConvTile<V, kOcBlock, 3>::Run(in, cstride, icg, offs, taps, w, out, ld);
}
