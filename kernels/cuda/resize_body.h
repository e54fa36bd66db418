// The CUDA Resize's device body: each output element the weighted sum over the product of its
// axes' taps (identity axes: one tap of weight 1; nearest: one tap per axis, so an exact copy;
// linear over H and W: 2 x 2), the taps and weights per output index of every axis taken from
// the tables every backend samples by (kernels/reference/resample.h's ResizeAxisTaps). Weights
// and sums in double, as the reference (which sums one axis at a time; the rounding to float then
// almost always agrees bit for bit). kernels/cuda/resize_tables.h builds the tables;
// tests/kernels/cuda_movement_body_test.cc runs this on the CPU against the reference Resize.
#pragma once

#include <cstdint>

#include "kernels/cuda/hd.h"

namespace whittle::cuda {

constexpr int kResizeMaxRank = 8;

struct ResizeGeom {
  int rank = 0;
  int64_t out_dims[kResizeMaxRank] = {};
  int64_t in_strides[kResizeMaxRank] = {};  // x's element strides
  int taps[kResizeMaxRank] = {};            // taps per output index of each axis
  int64_t offset[kResizeMaxRank] = {};      // where each axis's rows start in idx / w
  const int32_t* idx = nullptr;             // per axis: [out_dims[d] * taps[d]] input indices
  const double* w = nullptr;                // their weights, the same layout
};

WH_HD void ResizeAt(const float* x, float* y, const ResizeGeom& g, int64_t i) {
  int64_t o[kResizeMaxRank];
  int64_t rest = i;
  int64_t combos = 1;
  for (int d = g.rank - 1; d >= 0; --d) {
    o[d] = rest % g.out_dims[d];
    rest /= g.out_dims[d];
    combos *= g.taps[d];
  }
  double acc = 0.0;
  for (int64_t c = 0; c < combos; ++c) {  // one tap of every axis per combination
    int64_t k = c, off = 0;
    double wt = 1.0;
    for (int d = g.rank - 1; d >= 0; --d) {
      const int64_t t = k % g.taps[d];
      k /= g.taps[d];
      const int64_t e = g.offset[d] + o[d] * g.taps[d] + t;
      off += static_cast<int64_t>(g.idx[e]) * g.in_strides[d];
      wt *= g.w[e];
    }
    acc += wt * static_cast<double>(x[off]);
  }
  y[i] = static_cast<float>(acc);
}

}  // namespace whittle::cuda
