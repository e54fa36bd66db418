// The CUDA Resize's tables, built on the host from the axis tables every backend samples by
// (ResizeAxisTaps): for the last two axes, per output row and column, the input rows/columns and
// their weights, laid out as kernels/cuda/resize_body.h reads them. No CUDA here, so the body
// test builds them the same way.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/reference/resample.h"
#include "lib/ir/status.h"
#include "lib/ir/tensor.h"

namespace whittle::cuda {

struct ResizeTables {
  int nh = 1, nw = 1;
  std::vector<int32_t> ints;  // [out_h * nh rows | out_w * nw columns]
  std::vector<double> weights;  // their weights, the same layout
};

// Unimplemented for what the CUDA Resize leaves to the CPU: rank < 2, an axis before the last two
// that changes, tf_crop_and_resize, an axis over 2^31 elements.
inline StatusOr<ResizeTables> BuildResizeTables(const ResizeParams& p, const Dims& in, const Dims& out,
                                                const std::vector<double>& scales) {
  const size_t r = in.size();
  if (r < 2 || out.size() != r || scales.size() != r || p.coord == ResizeCoord::kTfCropAndResize)
    return Unimplemented("the CUDA Resize resizes the last two axes (no tf_crop_and_resize)");
  for (size_t d = 0; d + 2 < r; ++d)
    if (in[d] != out[d] || scales[d] != 1.0) return Unimplemented("the CUDA Resize resizes the last two axes only");
  if (in[r - 2] > INT32_MAX || in[r - 1] > INT32_MAX) return Unimplemented("a CUDA Resize axis over 2^31 elements");
  ResizeTables t;
  std::vector<int32_t> idx[2];
  std::vector<double> w[2];
  for (int a = 0; a < 2; ++a) {
    const size_t d = r - 2 + static_cast<size_t>(a);
    WH_ASSIGN_OR_RETURN(AxisTaps taps, ResizeAxisTaps(p, in[d], out[d], scales[d], 0.0, 1.0));
    int& n = a == 0 ? t.nh : t.nw;
    if (taps.identity) {  // copied: one tap of weight 1 at the same index
      n = 1;
      for (int64_t y = 0; y < out[d]; ++y) {
        idx[a].push_back(static_cast<int32_t>(y));
        w[a].push_back(1.0);
      }
      continue;
    }
    n = taps.n;
    for (size_t k = 0; k < taps.idx.size(); ++k) {
      idx[a].push_back(static_cast<int32_t>(taps.idx[k]));
      w[a].push_back(taps.w[k]);
    }
  }
  t.ints = idx[0];
  t.ints.insert(t.ints.end(), idx[1].begin(), idx[1].end());
  t.weights = w[0];
  t.weights.insert(t.weights.end(), w[1].begin(), w[1].end());
  return t;
}

}  // namespace whittle::cuda
