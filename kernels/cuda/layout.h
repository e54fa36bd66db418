// The host-side layouts the CUDA factories hand their kernels: strided views (numpy broadcasting,
// Slice, Split, DepthToSpace, a plain copy) and Pad's index tables. In a header without CUDA, so
// that the body tests build them the same way.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/common/index.h"
#include "kernels/cuda/elementwise.h"
#include "lib/ir/tensor.h"

namespace whittle::cuda {

// Strides of t's dims read as out's (right-aligned, 0 where t has 1 or no dim).
inline void BroadcastStrides(const Dims& t, const Dims& out, int64_t* strides) {
  const int r = static_cast<int>(out.size()), tr = static_cast<int>(t.size());
  int64_t s = 1;
  for (int d = r - 1; d >= 0; --d) {
    const int td = d - (r - tr);
    const int64_t dim = td >= 0 ? t[static_cast<size_t>(td)] : 1;
    strides[d] = dim == 1 ? 0 : s;
    s *= dim;
  }
}

// A plain copy of n elements as a strided copy.
inline BroadcastShape IdentityCopy(int64_t n) {
  BroadcastShape s;
  s.rank = 1;
  s.dims[0] = n;
  s.a_strides[0] = 1;
  return s;
}

// A slice of x (dims) as a strided copy: y's index i reads x at offset + StridedOffset(s, i) (the
// first selected element, then x's strides times the steps). Returns false when the slice does
// not give y_dims or has more than kMaxRank dims.
inline bool SliceCopyShape(const Dims& x, const SliceParams& p, const Dims& y_dims, BroadcastShape* s,
                           int64_t* offset) {
  const int r = static_cast<int>(x.size());
  if (r > kMaxRank || y_dims.size() != x.size()) return false;
  *s = BroadcastShape();
  s->rank = r > 0 ? r : 1;
  s->dims[0] = 1;
  int64_t stride = 1;
  *offset = 0;
  for (int d = r - 1; d >= 0; --d) {
    const size_t k = static_cast<size_t>(d);
    if (p.len[k] != y_dims[k]) return false;
    s->dims[d] = p.len[k];
    s->a_strides[d] = stride * p.step[k];
    *offset += p.start[k] * stride;
    stride *= x[k];
  }
  return true;
}

// Split of x (dims) along axis into outputs of out_dims (each x's dims but for the axis): each a
// strided copy from its offset. False when they do not tile the axis.
inline bool SplitCopyShapes(const Dims& x, int64_t axis, const std::vector<Dims>& out_dims,
                            std::vector<std::pair<BroadcastShape, int64_t>>* copies) {
  copies->clear();
  if (axis < 0 || axis >= static_cast<int64_t>(x.size())) return false;
  const size_t a = static_cast<size_t>(axis);
  SliceParams p;
  p.start.assign(x.size(), 0);
  p.step.assign(x.size(), 1);
  int64_t begin = 0;
  for (const Dims& y : out_dims) {
    if (y.size() != x.size()) return false;
    p.len = y;
    p.start[a] = begin;
    begin += y[a];
    BroadcastShape s;
    int64_t offset = 0;
    if (!SliceCopyShape(x, p, y, &s, &offset)) return false;
    copies->emplace_back(s, offset);
  }
  return begin == x[a];
}

// Pad's tables: per axis, the input index each output index reads (PadSourceIndex; -1: the
// constant), concatenated; offsets where each axis's run starts. False for a bad shape.
inline bool PadTables(const Dims& x, const Dims& y, const std::vector<int64_t>& pads, PadMode mode,
                      std::vector<int32_t>* idx, int64_t offsets[kMaxRank]) {
  const size_t r = x.size();
  if (y.size() != r || pads.size() != 2 * r || r > static_cast<size_t>(kMaxRank)) return false;
  idx->clear();
  for (size_t d = 0; d < r; ++d) {
    if (x[d] > INT32_MAX || y[d] != x[d] + pads[d] + pads[r + d]) return false;
    if (x[d] == 0 && mode != PadMode::kConstant && y[d] > 0) return false;
    offsets[d] = static_cast<int64_t>(idx->size());
    for (int64_t o = 0; o < y[d]; ++o)
      idx->push_back(static_cast<int32_t>(x[d] == 0 ? -1 : PadSourceIndex(o, pads[d], x[d], mode)));
  }
  return true;
}

// DepthToSpace of x [N, C*b*b, H, W] (DCR, or CRD when crd) as a strided copy: y [N, C, H*b, W*b]
// walked as [N, C, H, b, W, b], each index at the stride of x it reads. False for a bad shape.
inline bool DepthToSpaceCopyShape(const Dims& x, int64_t b, bool crd, BroadcastShape* s) {
  if (x.size() != 4 || b < 1 || x[1] % (b * b) != 0) return false;
  const int64_t N = x[0], C = x[1] / (b * b), H = x[2], W = x[3], plane = H * W;
  *s = BroadcastShape();
  s->rank = 6;
  const int64_t dims[6] = {N, C, H, b, W, b};
  const int64_t strides[6] = {x[1] * plane, crd ? b * b * plane : plane, W, crd ? b * plane : b * C * plane, 1,
                              crd ? plane : C * plane};
  for (int d = 0; d < 6; ++d) {
    s->dims[d] = dims[d];
    s->a_strides[d] = strides[d];
  }
  return true;
}

}  // namespace whittle::cuda
