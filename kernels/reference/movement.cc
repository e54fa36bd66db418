#include "kernels/reference/movement.h"

#include <algorithm>
#include <cstring>
#include <limits>

namespace whittle {

std::vector<int64_t> StridesOf(const Dims& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t i = dims.size(); i > 1; --i) s[i - 2] = s[i - 1] * dims[i - 1];
  return s;
}

bool NextIndex(std::vector<int64_t>& idx, const Dims& dims) {
  for (size_t i = dims.size(); i > 0; --i) {
    if (++idx[i - 1] < dims[i - 1]) return true;
    idx[i - 1] = 0;
  }
  return false;
}

StatusOr<std::vector<int64_t>> ResolvePerm(const std::vector<int64_t>& perm, int rank) {
  std::vector<int64_t> p = perm;
  if (p.empty())
    for (int i = rank - 1; i >= 0; --i) p.push_back(i);
  if (static_cast<int>(p.size()) != rank)
    return InvalidArgument("perm " + DimsToString(perm) + " does not match rank " + std::to_string(rank));
  std::vector<bool> seen(p.size(), false);
  for (int64_t v : p) {
    if (v < 0 || v >= rank || seen[static_cast<size_t>(v)])
      return InvalidArgument("perm " + DimsToString(perm) + " is not a permutation");
    seen[static_cast<size_t>(v)] = true;
  }
  return p;
}

StatusOr<SliceParams> ResolveSlice(const Dims& in_dims, const std::vector<int64_t>& starts,
                                   const std::vector<int64_t>& ends, std::vector<int64_t> axes,
                                   std::vector<int64_t> steps) {
  const int64_t r = static_cast<int64_t>(in_dims.size());
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    return InvalidArgument("starts, ends, axes and steps must have the same length");
  SliceParams p;
  p.start.assign(in_dims.size(), 0);
  p.step.assign(in_dims.size(), 1);
  p.len = in_dims;
  std::vector<bool> seen(in_dims.size(), false);
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t a = axes[i];
    if (a < -r || a >= r) return InvalidArgument("slice axis " + std::to_string(a) + " is out of range");
    if (a < 0) a += r;
    if (seen[static_cast<size_t>(a)]) return InvalidArgument("slice axis " + std::to_string(axes[i]) + " is repeated");
    seen[static_cast<size_t>(a)] = true;
    const int64_t step = steps[i];
    if (step == 0) return InvalidArgument("slice steps may not be 0");
    const int64_t d = in_dims[static_cast<size_t>(a)];
    int64_t s = starts[i], e = ends[i], len = 0;
    if (d > 0) {
      if (s < 0) s += d;
      if (e < 0) e += d;
      if (step > 0) {
        s = std::clamp<int64_t>(s, 0, d);
        e = std::clamp<int64_t>(e, 0, d);
        len = e > s ? (e - s - 1) / step + 1 : 0;
      } else {
        s = std::clamp<int64_t>(s, 0, d - 1);
        e = std::clamp<int64_t>(e, -1, d - 1);
        const int64_t ns = step == std::numeric_limits<int64_t>::min() ? std::numeric_limits<int64_t>::max() : -step;
        len = s > e ? (s - e - 1) / ns + 1 : 0;
      }
    }
    p.start[static_cast<size_t>(a)] = len > 0 ? s : 0;
    p.step[static_cast<size_t>(a)] = len > 1 ? step : 1;  // keeps step * stride in range
    p.len[static_cast<size_t>(a)] = len;
  }
  return p;
}

StatusOr<PadMode> ParsePadMode(const std::string& mode) {
  if (mode == "constant") return PadMode::kConstant;
  if (mode == "reflect") return PadMode::kReflect;
  if (mode == "edge") return PadMode::kEdge;
  return InvalidArgument("pad mode '" + mode + "' is not one of constant, reflect, edge");
}

int64_t PadSourceIndex(int64_t o, int64_t pad_begin, int64_t d, PadMode mode) {
  const int64_t j = o - pad_begin;
  if (j >= 0 && j < d) return j;
  switch (mode) {
    case PadMode::kConstant: return -1;
    case PadMode::kEdge: return j < 0 ? 0 : d - 1;
    case PadMode::kReflect: {
      if (d == 1) return 0;
      // Reflection about both ends repeats with period 2(d-1) (numpy 'reflect').
      const int64_t period = 2 * (d - 1);
      int64_t m = j % period;
      if (m < 0) m += period;
      return m < d ? m : period - m;
    }
  }
  return -1;
}

namespace {

uint16_t FloatToHalfBits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t mant = x & 0x7fffffu;
  const int32_t exp = static_cast<int32_t>((x >> 23) & 0xffu);
  if (exp == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0u));
  const int32_t e = exp - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  if (e <= 0) {  // subnormal half
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    const uint32_t shift = static_cast<uint32_t>(14 - e);
    uint32_t h = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = sign | (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry correctly bumps the exponent
  return static_cast<uint16_t>(h);
}

template <class T>
uint64_t BitsOf(T v) {
  uint64_t b = 0;
  std::memcpy(&b, &v, sizeof(T));
  return b;
}

}  // namespace

StatusOr<uint64_t> PadValueBits(float value, DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return BitsOf(value);
    case DType::kFloat64: return BitsOf(static_cast<double>(value));
    case DType::kFloat16: return BitsOf(FloatToHalfBits(value));
    case DType::kBFloat16: {
      uint32_t x;
      std::memcpy(&x, &value, 4);
      const uint32_t rounded = x + 0x7fffu + ((x >> 16) & 1u);
      return BitsOf(static_cast<uint16_t>(rounded >> 16));
    }
    case DType::kBool: return BitsOf(static_cast<uint8_t>(value != 0.f));
    case DType::kInt8: return BitsOf(static_cast<int8_t>(value));
    case DType::kUInt8: return BitsOf(static_cast<uint8_t>(value));
    case DType::kInt16: return BitsOf(static_cast<int16_t>(value));
    case DType::kUInt16: return BitsOf(static_cast<uint16_t>(value));
    case DType::kInt32: return BitsOf(static_cast<int32_t>(value));
    case DType::kUInt32: return BitsOf(static_cast<uint32_t>(value));
    case DType::kInt64: return BitsOf(static_cast<int64_t>(value));
    case DType::kUInt64: return BitsOf(static_cast<uint64_t>(value));
    default: return InvalidArgument(std::string("cannot pad a ") + DTypeName(dtype) + " tensor");
  }
}

Status TransposeReference(const Tensor& in, const std::vector<int64_t>& perm, Tensor* out) {
  const std::vector<int64_t> is = StridesOf(in.dims());
  return DispatchByElementSize(DTypeSize(in.dtype()), [&](auto e) -> Status {
    using E = decltype(e);
    const E* src = static_cast<const E*>(in.raw_data());
    E* dst = static_cast<E*>(out->raw_data());
    if (out->numel() == 0) return Status::Ok();
    std::vector<int64_t> idx(out->dims().size(), 0);
    int64_t o = 0;
    do {
      int64_t off = 0;
      for (size_t k = 0; k < idx.size(); ++k) off += idx[k] * is[static_cast<size_t>(perm[k])];
      dst[o++] = src[off];
    } while (NextIndex(idx, out->dims()));
    return Status::Ok();
  });
}

Status ConcatReference(const std::vector<const Tensor*>& ins, int64_t axis, Tensor* out) {
  const std::vector<int64_t> os = StridesOf(out->dims());
  return DispatchByElementSize(DTypeSize(out->dtype()), [&](auto e) -> Status {
    using E = decltype(e);
    E* dst = static_cast<E*>(out->raw_data());
    int64_t offset = 0;  // position of this input along axis
    for (const Tensor* t : ins) {
      const E* src = static_cast<const E*>(t->raw_data());
      if (t->numel() > 0) {
        std::vector<int64_t> idx(t->dims().size(), 0);
        int64_t i = 0;
        do {
          int64_t off = 0;
          for (size_t k = 0; k < idx.size(); ++k)
            off += (idx[k] + (static_cast<int64_t>(k) == axis ? offset : 0)) * os[k];
          dst[off] = src[i++];
        } while (NextIndex(idx, t->dims()));
      }
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
      if (t->numel() > 0) {
        std::vector<int64_t> idx(t->dims().size(), 0);
        int64_t i = 0;
        do {
          int64_t off = 0;
          for (size_t k = 0; k < idx.size(); ++k)
            off += (idx[k] + (static_cast<int64_t>(k) == axis ? offset : 0)) * is[k];
          dst[i++] = src[off];
        } while (NextIndex(idx, t->dims()));
      }
      offset += t->dim(static_cast<int>(axis));
    }
    return Status::Ok();
  });
}

Status SliceReference(const Tensor& in, const SliceParams& p, Tensor* out) {
  if (p.len != out->dims())
    return Internal("slice output dims " + DimsToString(out->dims()) + " differ from " + DimsToString(p.len));
  const std::vector<int64_t> is = StridesOf(in.dims());
  return DispatchByElementSize(DTypeSize(in.dtype()), [&](auto e) -> Status {
    using E = decltype(e);
    const E* src = static_cast<const E*>(in.raw_data());
    E* dst = static_cast<E*>(out->raw_data());
    if (out->numel() == 0) return Status::Ok();
    std::vector<int64_t> idx(p.len.size(), 0);
    int64_t o = 0;
    do {
      int64_t off = 0;
      for (size_t k = 0; k < idx.size(); ++k) off += (p.start[k] + idx[k] * p.step[k]) * is[k];
      dst[o++] = src[off];
    } while (NextIndex(idx, p.len));
    return Status::Ok();
  });
}

Status GatherReference(const Tensor& data, const Tensor& indices, int64_t axis, Tensor* out) {
  if (indices.dtype() != DType::kInt32 && indices.dtype() != DType::kInt64)
    return InvalidArgument("Gather indices must be int32 or int64");
  const int a = static_cast<int>(axis);
  const int64_t d = data.dim(a);
  int64_t outer = 1, inner = 1;
  for (int k = 0; k < a; ++k) outer *= data.dim(k);
  for (int k = a + 1; k < data.rank(); ++k) inner *= data.dim(k);
  const int64_t n = indices.numel();
  std::vector<int64_t> idx(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    int64_t v = indices.dtype() == DType::kInt64 ? indices.data<int64_t>()[i] : indices.data<int32_t>()[i];
    if (v < -d || v >= d)
      return OutOfRange("Gather index " + std::to_string(v) + " at position " + std::to_string(i) +
                        " is out of range for axis " + std::to_string(axis) + " of size " + std::to_string(d));
    idx[static_cast<size_t>(i)] = v < 0 ? v + d : v;
  }
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
  const std::vector<int64_t> is = StridesOf(in.dims());
  std::vector<int64_t> bstride(static_cast<size_t>(r), 0);  // 0 on broadcast axes
  for (int k = 0; k < ir; ++k) {
    const int ok = k + r - ir;
    if (in.dim(k) == out->dim(ok)) bstride[static_cast<size_t>(ok)] = in.dim(k) == 1 ? 0 : is[static_cast<size_t>(k)];
    else if (in.dim(k) != 1)
      return Internal("Expand input " + DimsToString(in.dims()) + " does not broadcast to " + DimsToString(out->dims()));
  }
  return DispatchByElementSize(DTypeSize(in.dtype()), [&](auto e) -> Status {
    using E = decltype(e);
    const E* src = static_cast<const E*>(in.raw_data());
    E* dst = static_cast<E*>(out->raw_data());
    if (out->numel() == 0) return Status::Ok();
    std::vector<int64_t> idx(static_cast<size_t>(r), 0);
    int64_t o = 0;
    do {
      int64_t off = 0;
      for (size_t k = 0; k < idx.size(); ++k) off += idx[k] * bstride[k];
      dst[o++] = src[off];
    } while (NextIndex(idx, out->dims()));
    return Status::Ok();
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
  return DispatchByElementSize(DTypeSize(in.dtype()), [&](auto e) -> Status {
    using E = decltype(e);
    const E* src = static_cast<const E*>(in.raw_data());
    E* dst = static_cast<E*>(out->raw_data());
    if (out->numel() == 0) return Status::Ok();
    std::vector<int64_t> idx(static_cast<size_t>(out->rank()), 0);
    int64_t o = 0;
    do {
      int64_t off = 0;
      for (size_t k = 0; k < idx.size(); ++k) off += (idx[k] % in.dims()[k]) * is[k];
      dst[o++] = src[off];
    } while (NextIndex(idx, out->dims()));
    return Status::Ok();
  });
}

namespace {
template <class T>
void FillRange(const Tensor& start, const Tensor& delta, Tensor* out) {
  const T s = start.data<T>()[0], d = delta.data<T>()[0];
  T* p = out->data<T>();
  for (int64_t i = 0; i < out->numel(); ++i) p[i] = static_cast<T>(s + static_cast<T>(i) * d);
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
    default: return InvalidArgument(std::string("Range does not support ") + DTypeName(out->dtype()));
  }
  return Status::Ok();
}

}  // namespace whittle
