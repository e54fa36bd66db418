// The CUDA Resize's tables, built on the host from the axis tables every backend samples by
// (ResizeAxisTaps): per axis and output index, the input indices and their weights, laid out as
// kernels/cuda/resize_body.h reads them. No CUDA here, so the body test builds them the same way.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cuda/resize_body.h"
#include "kernels/reference/resample.h"
#include "lib/ir/status.h"
#include "lib/ir/tensor.h"

namespace whittle::cuda {

struct ResizeTables {
  int taps[kResizeMaxRank] = {};
  int64_t offset[kResizeMaxRank] = {};
  std::vector<int32_t> idx;
  std::vector<double> w;
};

// Unimplemented for what the CUDA Resize leaves to the CPU: tf_crop_and_resize, a rank over 8,
// an axis over 2^31 elements, more than 4096 tap combinations per output.
inline StatusOr<ResizeTables> BuildResizeTables(const ResizeParams& p, const Dims& in, const Dims& out,
                                                const std::vector<double>& scales) {
  const size_t r = in.size();
  if (r > static_cast<size_t>(kResizeMaxRank) || out.size() != r || scales.size() != r ||
      p.coord == ResizeCoord::kTfCropAndResize)
    return Unimplemented("the CUDA Resize takes up to 8 dims and no tf_crop_and_resize");
  ResizeTables t;
  int64_t combos = 1;
  for (size_t d = 0; d < r; ++d) {
    if (in[d] > INT32_MAX) return Unimplemented("a CUDA Resize axis over 2^31 elements");
    WH_ASSIGN_OR_RETURN(AxisTaps taps, ResizeAxisTaps(p, in[d], out[d], scales[d], 0.0, 1.0));
    t.offset[d] = static_cast<int64_t>(t.idx.size());
    if (taps.identity) {  // copied: one tap of weight 1 at the same index
      t.taps[d] = 1;
      for (int64_t y = 0; y < out[d]; ++y) {
        t.idx.push_back(static_cast<int32_t>(y));
        t.w.push_back(1.0);
      }
    } else {
      t.taps[d] = taps.n;
      for (size_t k = 0; k < taps.idx.size(); ++k) {
        t.idx.push_back(static_cast<int32_t>(taps.idx[k]));
        t.w.push_back(taps.w[k]);
      }
    }
    combos *= t.taps[d];
  }
  if (combos > 4096) return Unimplemented("a CUDA Resize of more than 4096 taps per output");
  return t;
}

// The kernel's geometry from the tables (idx, w: where the tables are, on the device or not).
inline ResizeGeom ResizeGeomOf(const ResizeTables& t, const Dims& in, const Dims& out, const int32_t* idx,
                               const double* w) {
  ResizeGeom g;
  g.rank = static_cast<int>(in.size());
  int64_t stride = 1;
  for (int d = g.rank - 1; d >= 0; --d) {
    g.out_dims[d] = out[static_cast<size_t>(d)];
    g.in_strides[d] = stride;
    stride *= in[static_cast<size_t>(d)];
    g.taps[d] = t.taps[d];
    g.offset[d] = t.offset[d];
  }
  g.idx = idx;
  g.w = w;
  return g;
}

}  // namespace whittle::cuda
