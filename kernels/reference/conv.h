// Reference Conv kernel (plain loops, any spatial rank, float and double) and the sliding-window
// geometry it shares with the pooling kernels and the fast CPU kernels: attribute parsing
// (kernel_shape, strides, dilations, pads, auto_pad, ceil_mode) and resolution of pads and output
// sizes for concrete input dims, following ONNX 1.12 (opsets 7..17). The op's shape inference in
// lib/ops computes the same output sizes; kernels recompute them because they need the pads.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/kernel.h"

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

// Y[n, m, o...] = B[m] + sum over the group's channels and kernel taps; taps in the padding add 0.
template <class T>
void ConvReference(const ConvShape& s, const T* x, const T* w, const T* b, T* y);

StatusOr<std::unique_ptr<OpKernel>> CreateConvReferenceKernel(const KernelInit& init);

}  // namespace whittle
