#include "kernels/reference/movement.h"

#include "kernels/common/broadcast.h"
#include "kernels/common/dtype_dispatch.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace whittle {
namespace {
// out[o] = in[source(idx)] for every row-major multi-index idx of out's dims: the one loop of
// the ops that only reorder elements (Transpose, Slice, Expand, Tile).
template <class Source>
Status CopyFromSource(const Tensor& in, Tensor* out, Source source) {
  return DispatchByElementSize(DTypeSize(in.dtype()), [&](auto e) -> Status {
    using E = decltype(e);
    const E* src = static_cast<const E*>(in.raw_data());
    E* dst = static_cast<E*>(out->raw_data());
    if (out->numel() == 0) return Status::Ok();
    std::vector<int64_t> idx(out->dims().size(), 0);
    int64_t o = 0;
    do {
      dst[o++] = src[source(idx)];
    } while (NextIndex(idx, out->dims()));
    return Status::Ok();
  });
}
}  // namespace

Status TransposeReference(const Tensor& in, const std::vector<int64_t>& perm, Tensor* out) {
  const std::vector<int64_t> is = StridesOf(in.dims());
  return CopyFromSource(in, out, [&](const std::vector<int64_t>& idx) {
    int64_t off = 0;
    for (size_t k = 0; k < idx.size(); ++k) off += idx[k] * is[static_cast<size_t>(perm[k])];
    return off;
  });
}

namespace {
// Calls f(i, off) for every element of a block of dims `part` that sits at `offset` along axis
// inside a tensor of row-major strides ws: i is the block's flat index, off the tensor's.
template <class F>
void ForEachInBlock(const Dims& part, const std::vector<int64_t>& ws, int64_t axis, int64_t offset, F f) {
  std::vector<int64_t> idx(part.size(), 0);
  int64_t i = 0;
  do {
    int64_t off = 0;
    for (size_t k = 0; k < idx.size(); ++k)
      off += (idx[k] + (static_cast<int64_t>(k) == axis ? offset : 0)) * ws[k];
    f(i++, off);
  } while (NextIndex(idx, part));
}
}  // namespace

Status ConcatReference(const std::vector<const Tensor*>& ins, int64_t axis, Tensor* out) {
  const std::vector<int64_t> os = StridesOf(out->dims());
  return DispatchByElementSize(DTypeSize(out->dtype()), [&](auto e) -> Status {
    using E = decltype(e);
    E* dst = static_cast<E*>(out->raw_data());
    int64_t offset = 0;  // position of this input along axis
    for (const Tensor* t : ins) {
      const E* src = static_cast<const E*>(t->raw_data());
      if (t->numel() > 0)
        ForEachInBlock(t->dims(), os, axis, offset, [&](int64_t i, int64_t off) { dst[off] = src[i]; });
      offset += t->dim(static_cast<int>(axis));
    }
    return Status::Ok();
  });
}

Status SplitReference(const Tensor& in, int64_t axis, const std::vector<Tensor*>& outs) {
  const std::vector<int64_t> is = StridesOf(in.dims());
  int64_t total = 0;
  for (const Tensor* t : outs) total += t ? t->dim(static_cast<int>(axis)) : 0;
  if (total != in.dim(static_cast<int>(axis))) return Internal("split outputs do not cover the input");
  return DispatchByElementSize(DTypeSize(in.dtype()), [&](auto e) -> Status {
    using E = decltype(e);
    const E* src = static_cast<const E*>(in.raw_data());
    int64_t offset = 0;
    for (Tensor* t : outs) {
      E* dst = static_cast<E*>(t->raw_data());
      if (t->numel() > 0)
        ForEachInBlock(t->dims(), is, axis, offset, [&](int64_t i, int64_t off) { dst[i] = src[off]; });
      offset += t->dim(static_cast<int>(axis));
    }
    return Status::Ok();
  });
}

Status SliceReference(const Tensor& in, const SliceParams& p, Tensor* out) {
  if (p.len != out->dims())
    return Internal("slice output dims " + DimsToString(out->dims()) + " differ from " + DimsToString(p.len));
  const std::vector<int64_t> is = StridesOf(in.dims());
  return CopyFromSource(in, out, [&](const std::vector<int64_t>& idx) {
    int64_t off = 0;
    for (size_t k = 0; k < idx.size(); ++k) off += (p.start[k] + idx[k] * p.step[k]) * is[k];
    return off;
  });
}

Status GatherReference(const Tensor& data, const Tensor& indices, int64_t axis, Tensor* out) {
  const int a = static_cast<int>(axis);
  const int64_t d = data.dim(a);
  WH_ASSIGN_OR_RETURN(std::vector<int64_t> idx, ResolveGatherIndices(indices, axis, d));
  int64_t outer = 1, inner = 1;
  for (int k = 0; k < a; ++k) outer *= data.dim(k);
  for (int k = a + 1; k < data.rank(); ++k) inner *= data.dim(k);
  const int64_t n = indices.numel();
  return DispatchByElementSize(DTypeSize(data.dtype()), [&](auto e) -> Status {
    using E = decltype(e);
    const E* src = static_cast<const E*>(data.raw_data());
    E* dst = static_cast<E*>(out->raw_data());
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < n; ++i)
        for (int64_t k = 0; k < inner; ++k)
          dst[(o * n + i) * inner + k] = src[(o * d + idx[static_cast<size_t>(i)]) * inner + k];
    return Status::Ok();
  });
}

Status ExpandReference(const Tensor& in, Tensor* out) {
  const int r = out->rank(), ir = in.rank();
  if (ir > r) return Internal("Expand output has a lower rank than its input");
  WH_ASSIGN_OR_RETURN(const std::vector<int64_t> bstride, ExpandStrides(in.dims(), out->dims()));
  return CopyFromSource(in, out, [&](const std::vector<int64_t>& idx) {
    int64_t off = 0;
    for (size_t k = 0; k < idx.size(); ++k) off += idx[k] * bstride[k];
    return off;
  });
}

Status PadReference(const Tensor& in, const std::vector<int64_t>& pads, PadMode mode, uint64_t value_bits,
                    Tensor* out) {
  const size_t r = static_cast<size_t>(in.rank());
  if (pads.size() != 2 * r) return Internal("pads length does not match rank");
  for (size_t k = 0; k < r; ++k)
    if (in.dims()[k] + pads[k] + pads[k + r] != out->dims()[k]) return Internal("pad output dims mismatch");
  const std::vector<int64_t> is = StridesOf(in.dims());
  return DispatchByElementSize(DTypeSize(in.dtype()), [&](auto e) -> Status {
    using E = decltype(e);
    const E* src = static_cast<const E*>(in.raw_data());
    E* dst = static_cast<E*>(out->raw_data());
    E value;
    std::memcpy(&value, &value_bits, sizeof(E));
    if (out->numel() == 0) return Status::Ok();
    std::vector<int64_t> idx(r, 0);
    int64_t o = 0;
    do {
      int64_t off = 0;
      bool inside = true;
      for (size_t k = 0; k < r && inside; ++k) {
        const int64_t s = PadSourceIndex(idx[k], pads[k], in.dims()[k], mode);
        inside = s >= 0;
        off += s * is[k];
      }
      dst[o++] = inside ? src[off] : value;
    } while (NextIndex(idx, out->dims()));
    return Status::Ok();
  });
}

Status TileReference(const Tensor& in, Tensor* out) {
  if (in.rank() != out->rank()) return Internal("Tile output rank differs from its input");
  const std::vector<int64_t> is = StridesOf(in.dims());
  return CopyFromSource(in, out, [&](const std::vector<int64_t>& idx) {
    int64_t off = 0;
    for (size_t k = 0; k < idx.size(); ++k) off += (idx[k] % in.dims()[k]) * is[k];
    return off;
  });
}

namespace {
template <class T>
void FillRange(const Tensor& start, const Tensor& delta, Tensor* out) {
  const T s = start.data<T>()[0], d = delta.data<T>()[0];
  T* p = out->data<T>();
  for (int64_t i = 0; i < out->numel(); ++i) p[i] = static_cast<T>(s + static_cast<T>(i) * d);
}

// float16/bfloat16 (opset 27): start + i * delta in float (stash_type 1), rounded to nearest even.
void FillRangeHalf(const Tensor& start, const Tensor& delta, Tensor* out) {
  const bool bf = out->dtype() == DType::kBFloat16;
  auto to_float = [bf](uint16_t h) { return bf ? ew::BFloat16ToFloat(h) : ew::HalfToFloat(h); };
  const float s = to_float(ew::DataAs<uint16_t>(start)[0]), d = to_float(ew::DataAs<uint16_t>(delta)[0]);
  uint16_t* p = ew::DataAs<uint16_t>(*out);
  for (int64_t i = 0; i < out->numel(); ++i) {
    const float v = s + static_cast<float>(i) * d;
    if (!bf) {
      p[i] = ew::DoubleToHalf(v);
      continue;
    }
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof(bits));
    p[i] = std::isnan(v) ? static_cast<uint16_t>((bits >> 16) | 0x0040)
                         : static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
  }
}
}  // namespace

Status RangeReference(const Tensor& start, const Tensor& delta, Tensor* out) {
  if (start.dtype() != out->dtype() || delta.dtype() != out->dtype())
    return InvalidArgument("Range start/delta must have the output's type");
  switch (out->dtype()) {
    case DType::kFloat32: FillRange<float>(start, delta, out); break;
    case DType::kFloat64: FillRange<double>(start, delta, out); break;
    case DType::kInt16: FillRange<int16_t>(start, delta, out); break;
    case DType::kInt32: FillRange<int32_t>(start, delta, out); break;
    case DType::kInt64: FillRange<int64_t>(start, delta, out); break;
    case DType::kFloat16: case DType::kBFloat16: FillRangeHalf(start, delta, out); break;
    default: return InvalidArgument(std::string("Range does not support ") + DTypeName(out->dtype()));
  }
  return Status::Ok();
}

namespace reference {
namespace {
// The table's signature carries a thread budget that plain loops do not use.
Status TransposeRow(const Tensor& in, const std::vector<int64_t>& perm, Tensor* out, int) {
  return TransposeReference(in, perm, out);
}
Status ConcatRow(const std::vector<const Tensor*>& ins, int64_t axis, Tensor* out, int) {
  return ConcatReference(ins, axis, out);
}
Status SplitRow(const Tensor& in, int64_t axis, const std::vector<Tensor*>& outs, int) {
  return SplitReference(in, axis, outs);
}
Status SliceRow(const Tensor& in, const SliceParams& p, Tensor* out, int) { return SliceReference(in, p, out); }
Status GatherRow(const Tensor& data, const Tensor& indices, int64_t axis, Tensor* out, int) {
  return GatherReference(data, indices, axis, out);
}
Status ExpandRow(const Tensor& in, Tensor* out, int) { return ExpandReference(in, out); }
Status PadRow(const Tensor& in, const std::vector<int64_t>& pads, PadMode mode, uint64_t value_bits, Tensor* out, int) {
  return PadReference(in, pads, mode, value_bits, out);
}
Status TileRow(const Tensor& in, Tensor* out, int) { return TileReference(in, out); }
Status RangeRow(const Tensor& start, const Tensor& delta, Tensor* out, int) {
  return RangeReference(start, delta, out);
}
}  // namespace

const MovementFns kMovementFns{TransposeRow, ConcatRow, SplitRow, SliceRow, GatherRow,
                               ExpandRow,    PadRow,    TileRow,  RangeRow};
}  // namespace reference

}  // namespace whittle
