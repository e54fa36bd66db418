// The CUDA Resize's device body: y [planes, out_h, out_w] from x [planes, in_h, in_w], each output
// the weighted sum of nh x nw input taps, the taps and weights per output row and column taken
// from the axis tables every backend samples by (kernels/reference/resample.h's ResizeAxisTaps;
// nearest is one tap of weight 1, so an exact copy). Weights and sums in double, as the reference
// (which sums one axis at a time; the rounding to float then almost always agrees bit for bit). kernels/cuda/resize.cc builds the tables;
// tests/kernels/cuda_movement_body_test.cc runs this on the CPU against the reference Resize.
#pragma once

#include <cstdint>

#include "kernels/cuda/hd.h"

namespace whittle::cuda {

struct ResizeGeom {
  int64_t planes = 0, in_h = 0, in_w = 0, out_h = 0, out_w = 0;
  int nh = 1, nw = 1;                       // taps per output row / column
  const int32_t* iy = nullptr;              // [out_h * nh] input rows
  const double* wy = nullptr;               // [out_h * nh] their weights
  const int32_t* ix = nullptr;              // [out_w * nw] input columns
  const double* wx = nullptr;               // [out_w * nw] their weights
};

WH_HD void ResizeAt(const float* x, float* y, const ResizeGeom& g, int64_t i) {
  const int64_t ox = i % g.out_w, oy = (i / g.out_w) % g.out_h, p = i / (g.out_w * g.out_h);
  const float* xp = x + p * g.in_h * g.in_w;
  double acc = 0.0;
  for (int a = 0; a < g.nh; ++a) {
    const float* row = xp + static_cast<int64_t>(g.iy[oy * g.nh + a]) * g.in_w;
    double r = 0.0;
    for (int b = 0; b < g.nw; ++b) r += g.wx[ox * g.nw + b] * static_cast<double>(row[g.ix[ox * g.nw + b]]);
    acc += g.wy[oy * g.nh + a] * r;
  }
  y[i] = static_cast<float>(acc);
}

}  // namespace whittle::cuda
