// Sliding-window geometry of Conv, ConvTranspose, the pools and the integer convs: attribute
// parsing (kernel_shape, strides, dilations, pads, auto_pad, ceil_mode), resolution of pads and
// output sizes for concrete input dims following ONNX 1.12 (opsets 7..17), the Conv and
// ConvTranspose shape checks, and small inline helpers for the tap loops, shared by every
// backend's window kernels, the gradient ops' included (kernels/common/window.h adds the attributes
// they parse from a KernelInit).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "lib/ir/attribute.h"
#include "lib/ir/status.h"
#include "lib/ir/tensor.h"

namespace whittle {

constexpr int kMaxSpatialDims = 8;

enum class AutoPad { kNotSet, kSameUpper, kSameLower, kValid };

struct WindowAttrs {
  AutoPad auto_pad = AutoPad::kNotSet;
  std::vector<int64_t> kernel_shape;  // empty for Conv without the attribute (taken from W)
  std::vector<int64_t> strides, dilations, pads;  // empty: all 1 / all 1 / all 0
  bool ceil_mode = false;
};

// Reads the window attributes and checks values (kernel/stride/dilation > 0, pads >= 0, known
// auto_pad) and that the lengths present agree with each other.
StatusOr<WindowAttrs> ParseWindowAttrs(const AttributeMap& attrs);

struct WindowGeometry {
  int spatial = 0;
  int64_t in[kMaxSpatialDims] = {}, out[kMaxSpatialDims] = {}, kernel[kMaxSpatialDims] = {};
  int64_t stride[kMaxSpatialDims] = {}, dilation[kMaxSpatialDims] = {};
  int64_t pad_begin[kMaxSpatialDims] = {}, pad_end[kMaxSpatialDims] = {};
  int64_t InSize() const { return Product(in); }
  int64_t OutSize() const { return Product(out); }
  int64_t KernelSize() const { return Product(kernel); }

 private:
  int64_t Product(const int64_t* d) const {
    int64_t p = 1;
    for (int i = 0; i < spatial; ++i) p *= d[i];
    return p;
  }
};

// Resolves pads and output sizes for input spatial dims `in` and kernel dims `kernel` (spatial
// entries each). Errors when lengths disagree with `spatial` or the window does not fit.
Status ResolveWindow(const WindowAttrs& a, const int64_t* in, const int64_t* kernel, int spatial,
                     WindowGeometry* g);

// Shapes of one Conv call, validated against each other.
struct ConvShape {
  int64_t batch = 0, in_channels = 0, out_channels = 0, group = 1;
  WindowGeometry geo;
};
// X [N, C, D...], W [M, C/group, k...], optional B [M]; checks ranks, channel counts and bias.
Status ResolveConvShape(const WindowAttrs& a, int64_t group, const Tensor& x, const Tensor& w, const Tensor* b,
                        ConvShape* s);

// Input offset (row-major over g.in) of kernel tap k_idx at output position o_idx; false (and
// *off unspecified) when the tap falls in the padding.
inline bool TapOffset(const WindowGeometry& g, const int64_t* o_idx, const int64_t* k_idx, int64_t* off) {
  int64_t at = 0;
  bool inside = true;
  for (int i = 0; i < g.spatial && inside; ++i) {
    const int64_t p = o_idx[i] * g.stride[i] - g.pad_begin[i] + k_idx[i] * g.dilation[i];
    inside = p >= 0 && p < g.in[i];
    at = at * g.in[i] + p;
  }
  *off = at;
  return inside;
}

// Output columns [lo, hi) of a dim whose tap at offset `off` (input index = o*stride + off)
// lands inside [0, in).
inline void ValidRange(int64_t off, int64_t stride, int64_t in, int64_t out, int64_t* lo, int64_t* hi) {
  // Wide: a hostile stride near INT64_MAX overflowed -off + stride - 1 (fuzz_passes, a Conv).
  using Wide = __int128;
  const Wide s = stride < 1 ? 1 : stride, o = off, last = static_cast<Wide>(in) - 1 - o;
  const Wide l = o >= 0 ? 0 : (-o + s - 1) / s;
  const Wide h = last >= 0 ? std::min<Wide>(out, last / s + 1) : 0;
  *lo = static_cast<int64_t>(std::min<Wide>(l, out));
  *hi = static_cast<int64_t>(h < l ? std::min<Wide>(l, out) : h);
}

// The taps [*t0, *t1) of one dim (k taps from `start`, `d` >= 1 apart) whose position lies in
// [lo_bound, hi_bound), in closed form: a hostile kernel_shape of 2^30 over a small map costs
// nothing (issue 41's fuzzing: a pool that walked every tap ran past the time limit).
inline void TapRange(int64_t start, int64_t k, int64_t d, int64_t lo_bound, int64_t hi_bound, int64_t* t0,
                     int64_t* t1) {
  using Wide = __int128;
  const Wide dd = d < 1 ? 1 : d;
  const Wide lo = static_cast<Wide>(lo_bound) - start, hi = static_cast<Wide>(hi_bound) - 1 - start;
  Wide a = lo <= 0 ? 0 : (lo + dd - 1) / dd;                 // first tap at or past lo_bound
  Wide b = hi < 0 ? 0 : hi / dd + 1;                         // one past the last tap before hi_bound
  a = a > k ? k : a;
  b = b > k ? k : b;
  *t0 = static_cast<int64_t>(a);
  *t1 = static_cast<int64_t>(b < a ? a : b);
}

// Taps of one dim (k taps from `start`, `d` apart) whose position lies in [lo_bound, hi_bound):
// AveragePool's divisor, with the padding counted or not.
inline int64_t TapsIn(int64_t start, int64_t k, int64_t d, int64_t lo_bound, int64_t hi_bound) {
  int64_t t0, t1;
  TapRange(start, k, d, lo_bound, hi_bound, &t0, &t1);
  return t1 - t0;
}

// 2-D geometry view (1-D windows are 2-D with a height of one).
struct Geo2D {
  int64_t ih, iw, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
};
Geo2D To2D(const WindowGeometry& g);

// ConvTranspose attributes (kernels/common/window.h parses and checks them once): the window,
// group >= 1, output_padding >= 0, output_shape > 0 (spatial dims, or N, C and spatial dims).
struct ConvTransposeAttrs {
  WindowAttrs window;  // ceil_mode unused
  int64_t group = 1;
  std::vector<int64_t> output_padding, output_shape;  // empty: zeros / derived from the input
};

// One ConvTranspose call: X [N, C, D...], W [C, M/group, k...], optional B [M], Y [N, M, O...].
// geo is the geometry of the forward Conv that ConvTranspose is the adjoint of: geo.in = O (Y's
// spatial dims), geo.out = D (X's spatial dims), so TapOffset(geo, x_position, tap) is the Y offset
// that tap of that X position adds into. pad_begin/pad_end may be negative when output_shape asks
// for more than the natural size (the total padding is split with floor division, as the ONNX
// reference does: SAME_UPPER puts the odd unit at the end, NOTSET and SAME_LOWER at the start).
struct ConvTransposeShape {
  int64_t batch = 0, in_channels = 0, out_channels = 0, group = 1;
  WindowGeometry geo;
};
Status ResolveConvTransposeShape(const ConvTransposeAttrs& a, const Tensor& x, const Tensor& w, const Tensor* b,
                                 ConvTransposeShape* s);

}  // namespace whittle
