#include "kernels/common/index.h"

#include <algorithm>
#include <cstring>
#include <limits>

namespace whittle {

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
  if (mode == "wrap") return PadMode::kWrap;
  return InvalidArgument("pad mode '" + mode + "' is not one of constant, reflect, edge, wrap");
}

int64_t PadSourceIndex(int64_t o, int64_t pad_begin, int64_t d, PadMode mode) {
  const int64_t j = o - pad_begin;
  if (j >= 0 && j < d) return j;
  switch (mode) {
    case PadMode::kConstant: return -1;
    case PadMode::kEdge: return j < 0 ? 0 : d - 1;
    case PadMode::kWrap: return ((j % d) + d) % d;
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

StatusOr<std::vector<int64_t>> IndexValues(const Tensor* t, const char* what) {
  if (!t) return std::vector<int64_t>();
  if (t->dtype() != DType::kInt64 && t->dtype() != DType::kInt32)
    return InvalidArgument(std::string(what) + " must be int64, got " + DTypeName(t->dtype()));
  std::vector<int64_t> v(static_cast<size_t>(t->numel()));
  for (size_t k = 0; k < v.size(); ++k)
    v[k] = t->dtype() == DType::kInt64 ? t->data<int64_t>()[k] : t->data<int32_t>()[k];
  return v;
}

Status GatherIndexOutOfRange(int64_t v, int64_t position, int64_t axis, int64_t d) {
  return OutOfRange("Gather index " + std::to_string(v) + " at position " + std::to_string(position) +
                    " is out of range for axis " + std::to_string(axis) + " of size " + std::to_string(d));
}

StatusOr<std::vector<int64_t>> ResolveGatherIndices(const Tensor& indices, int64_t axis, int64_t d) {
  if (indices.dtype() != DType::kInt32 && indices.dtype() != DType::kInt64)
    return InvalidArgument("Gather indices must be int32 or int64");
  const int64_t n = indices.numel();
  std::vector<int64_t> idx(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = indices.dtype() == DType::kInt64 ? indices.data<int64_t>()[i] : indices.data<int32_t>()[i];
    if (v < -d || v >= d) return GatherIndexOutOfRange(v, i, axis, d);
    idx[static_cast<size_t>(i)] = v < 0 ? v + d : v;
  }
  return idx;
}

int64_t ReadIndexElement(const Tensor& t, int64_t i) {
  const size_t k = static_cast<size_t>(i);
  switch (t.dtype()) {
    case DType::kInt64:
      return t.data<int64_t>()[k];
    case DType::kInt32:
      return t.data<int32_t>()[k];
    case DType::kInt16:
      return t.data<int16_t>()[k];
    case DType::kInt8:
      return t.data<int8_t>()[k];
    case DType::kUInt8:
      return t.data<uint8_t>()[k];
    case DType::kUInt16:
      return t.data<uint16_t>()[k];
    case DType::kUInt32:
      return t.data<uint32_t>()[k];
    case DType::kUInt64:
      return static_cast<int64_t>(t.data<uint64_t>()[k]);
    case DType::kFloat32:
      return static_cast<int64_t>(t.data<float>()[k]);
    case DType::kFloat64:
      return static_cast<int64_t>(t.data<double>()[k]);
    default:
      WH_CHECK(false);
      return 0;
  }
}

StatusOr<std::vector<int64_t>> NormalizeAxes(const std::vector<int64_t>& axes, int rank) {
  std::vector<int64_t> r;
  for (int64_t a : axes) {
    if (a < -rank || a >= rank)
      return InvalidArgument("axis " + std::to_string(a) + " is out of range for rank " + std::to_string(rank));
    const int64_t n = a < 0 ? a + rank : a;
    if (std::find(r.begin(), r.end(), n) != r.end())
      return InvalidArgument("axis " + std::to_string(a) + " is repeated in axes");
    r.push_back(n);
  }
  std::sort(r.begin(), r.end());
  return r;
}

StatusOr<AxisSplit> SplitAtAxis(const Dims& dims, int64_t axis, bool coerce_2d) {
  const int64_t rank = static_cast<int64_t>(dims.size());
  if (axis < -rank || axis >= rank)
    return InvalidArgument("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  const size_t a = static_cast<size_t>(axis < 0 ? axis + rank : axis);
  AxisSplit s;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i < a) s.outer *= dims[i];
    else if (i == a || coerce_2d) s.n *= dims[i];
    else s.inner *= dims[i];
  }
  return s;
}

}  // namespace whittle
