#include "kernels/reference/index.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "kernels/common/broadcast.h"
#include "kernels/common/dtype_dispatch.h"

namespace whittle {
namespace {

StatusOr<int64_t> FixIndex(int64_t i, int64_t d, const char* what) {
  if (i < -d || i >= d)
    return InvalidArgument(std::string(what) + " index " + std::to_string(i) + " is out of range for a dimension of " +
                           std::to_string(d));
  return i < 0 ? i + d : i;
}

Status CheckIndexType(const Tensor& t, const char* what) {
  if (t.dtype() != DType::kInt64 && t.dtype() != DType::kInt32)
    return InvalidArgument(std::string(what) + " must be int32 or int64, got " + DTypeName(t.dtype()));
  return Status::Ok();
}

// Element size dispatch for data movement; byte copies make every dtype work.
template <class Fn>
Status ByBytes(const Tensor& t, Fn&& fn) {
  return DispatchByElementSize(DTypeSize(t.dtype()), std::forward<Fn>(fn));
}

template <class T>
T Combine(T a, T b, ScatterReduction r) {
  switch (r) {
    case ScatterReduction::kAdd:
      return static_cast<T>(a + b);
    case ScatterReduction::kMul:
      return static_cast<T>(a * b);
    default:
      return b;
  }
}

}  // namespace

StatusOr<ScatterReduction> ParseScatterReduction(const std::string& s) {
  if (s == "none") return ScatterReduction::kNone;
  if (s == "add") return ScatterReduction::kAdd;
  if (s == "mul") return ScatterReduction::kMul;
  return InvalidArgument("reduction must be none, add or mul, got '" + s + "'");
}

Status SizeReference(const Tensor& in, Tensor* out) {
  out->data<int64_t>()[0] = in.numel();
  return Status::Ok();
}

Status GatherElementsReference(const Tensor& data, const Tensor& indices, int64_t axis, Tensor* out) {
  WH_RETURN_IF_ERROR(CheckIndexType(indices, "GatherElements indices"));
  if (indices.rank() != data.rank() || out->dims() != indices.dims())
    return InvalidArgument("GatherElements: data " + DimsToString(data.dims()) + " and indices " +
                           DimsToString(indices.dims()) + " must have the same rank");
  if (out->numel() == 0) return Status::Ok();
  const std::vector<int64_t> ds = StridesOf(data.dims());
  const size_t ax = static_cast<size_t>(axis);
  return ByBytes(data, [&](auto e) -> Status {
    using E = decltype(e);
    const E* src = static_cast<const E*>(data.raw_data());
    E* dst = static_cast<E*>(out->raw_data());
    std::vector<int64_t> idx(indices.dims().size(), 0);
    int64_t o = 0;
    do {
      int64_t off = 0;
      for (size_t d = 0; d < idx.size(); ++d) {
        if (d == ax) continue;
        if (idx[d] >= data.dims()[d]) return InvalidArgument("GatherElements: indices shape exceeds data shape");
        off += idx[d] * ds[d];
      }
      WH_ASSIGN_OR_RETURN(int64_t j, FixIndex(ReadIndexElement(indices, o), data.dims()[ax], "GatherElements"));
      dst[o++] = src[off + j * ds[ax]];
    } while (NextIndex(idx, indices.dims()));
    return Status::Ok();
  });
}

Status TriluReference(const Tensor& in, int64_t k, bool upper, Tensor* out) {
  if (in.rank() < 2) return InvalidArgument("Trilu input must have rank >= 2, got " + DimsToString(in.dims()));
  const int64_t rows = in.dims()[in.dims().size() - 2], cols = in.dims().back();
  const int64_t mats = rows * cols == 0 ? 0 : in.numel() / (rows * cols);
  return ByBytes(in, [&](auto e) -> Status {
    using E = decltype(e);
    const E* src = static_cast<const E*>(in.raw_data());
    E* dst = static_cast<E*>(out->raw_data());
    for (int64_t m = 0; m < mats; ++m)
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) {
          const int64_t o = (m * rows + i) * cols + j;
          const bool keep = upper ? j - i >= k : j - i <= k;
          dst[o] = keep ? src[o] : E{0};
        }
    return Status::Ok();
  });
}

Status CumSumReference(const Tensor& in, int64_t axis, bool exclusive, bool reverse, Tensor* out) {
  const size_t ax = static_cast<size_t>(axis);
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < ax; ++d) outer *= in.dims()[d];
  for (size_t d = ax + 1; d < in.dims().size(); ++d) inner *= in.dims()[d];
  const int64_t n = in.dims()[ax];
  return DispatchArithmetic(in.dtype(), [&](auto zero) -> Status {
    using T = decltype(zero);
    const T* src = in.data<T>();
    T* dst = out->data<T>();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        T acc{0};
        for (int64_t s = 0; s < n; ++s) {
          const int64_t a = reverse ? n - 1 - s : s;
          const int64_t p = (o * n + a) * inner + i;
          if (exclusive) {
            dst[p] = acc;
            acc = static_cast<T>(acc + src[p]);
          } else {
            acc = static_cast<T>(acc + src[p]);
            dst[p] = acc;
          }
        }
      }
    return Status::Ok();
  });
}

Status EyeLikeReference(int64_t k, Tensor* out) {
  if (out->rank() != 2) return InvalidArgument("EyeLike output must be 2-D, got " + DimsToString(out->dims()));
  const int64_t rows = out->dims()[0], cols = out->dims()[1];
  auto fill = [&](auto one) -> Status {
    using T = decltype(one);
    T* dst = out->data<T>();
    std::fill(dst, dst + out->numel(), T{0});
    // k is an attribute any int64 may fill: compare against the dims before
    // adding, so k near INT64_MAX/MIN gives an all-zero output, not overflow.
    if (k >= cols || k <= -rows) return Status::Ok();
    for (int64_t i = std::max<int64_t>(0, -k); i < rows && i < cols - k; ++i) dst[i * cols + i + k] = one;
    return Status::Ok();
  };
  if (out->dtype() == DType::kBool) return fill(true);
  return DispatchArithmetic(out->dtype(), [&](auto zero) -> Status { return fill(static_cast<decltype(zero)>(1)); });
}

Status OneHotReference(const Tensor& indices, int64_t depth, const Tensor& values, int64_t axis, Tensor* out) {
  if (values.numel() != 2)
    return InvalidArgument("OneHot values must have 2 elements, got " + DimsToString(values.dims()));
  if (values.dtype() != out->dtype()) return InvalidArgument("OneHot output type must match values");
  if (indices.dtype() == DType::kBool || DTypeSize(indices.dtype()) == 0 || indices.dtype() == DType::kFloat16 ||
      indices.dtype() == DType::kBFloat16)
    return InvalidArgument(std::string("OneHot indices type ") + DTypeName(indices.dtype()) + " is not supported");
  const size_t ax = static_cast<size_t>(axis);
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < ax; ++d) outer *= indices.dims()[d];
  for (size_t d = ax; d < indices.dims().size(); ++d) inner *= indices.dims()[d];
  return ByBytes(values, [&](auto e) -> Status {
    using E = decltype(e);
    const E* v = static_cast<const E*>(values.raw_data());
    E* dst = static_cast<E*>(out->raw_data());
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t d = 0; d < depth; ++d)
        for (int64_t i = 0; i < inner; ++i) {
          int64_t id = ReadIndexElement(indices, o * inner + i);
          if (id < 0) id += depth;
          dst[(o * depth + d) * inner + i] = v[id == d ? 1 : 0];
        }
    return Status::Ok();
  });
}

Status DepthToSpaceReference(const Tensor& in, int64_t b, bool crd, Tensor* out) {
  if (in.rank() != 4) return InvalidArgument("DepthToSpace input must be 4-D, got " + DimsToString(in.dims()));
  const int64_t n = in.dim(0), c = in.dim(1), h = in.dim(2), w = in.dim(3);
  if (b <= 0 || c % (b * b) != 0)
    return InvalidArgument("DepthToSpace: channels " + std::to_string(c) + " not divisible by blocksize^2");
  const int64_t oc = c / (b * b);
  return ByBytes(in, [&](auto e) -> Status {
    using E = decltype(e);
    const E* src = static_cast<const E*>(in.raw_data());
    E* dst = static_cast<E*>(out->raw_data());
    for (int64_t bn = 0; bn < n; ++bn)
      for (int64_t ch = 0; ch < oc; ++ch)
        for (int64_t y = 0; y < h * b; ++y)
          for (int64_t x = 0; x < w * b; ++x) {
            const int64_t by = y % b, bx = x % b;
            const int64_t ic = crd ? (ch * b + by) * b + bx : (by * b + bx) * oc + ch;
            dst[((bn * oc + ch) * h * b + y) * w * b + x] = src[((bn * c + ic) * h + y / b) * w + x / b];
          }
    return Status::Ok();
  });
}

Status SpaceToDepthReference(const Tensor& in, int64_t b, bool crd, Tensor* out) {
  if (in.rank() != 4) return InvalidArgument("SpaceToDepth input must be 4-D, got " + DimsToString(in.dims()));
  const int64_t n = in.dim(0), c = in.dim(1), h = in.dim(2), w = in.dim(3);
  if (b <= 0 || h % b != 0 || w % b != 0)
    return InvalidArgument("SpaceToDepth: spatial dims " + DimsToString(in.dims()) + " not divisible by blocksize");
  const int64_t oh = h / b, ow = w / b;
  return ByBytes(in, [&](auto e) -> Status {
    using E = decltype(e);
    const E* src = static_cast<const E*>(in.raw_data());
    E* dst = static_cast<E*>(out->raw_data());
    for (int64_t bn = 0; bn < n; ++bn)
      for (int64_t by = 0; by < b; ++by)
        for (int64_t bx = 0; bx < b; ++bx)
          for (int64_t ch = 0; ch < c; ++ch)
            for (int64_t y = 0; y < oh; ++y)
              for (int64_t x = 0; x < ow; ++x) {
                const int64_t oc = crd ? (ch * b + by) * b + bx : (by * b + bx) * c + ch;
                dst[((bn * c * b * b + oc) * oh + y) * ow + x] = src[((bn * c + ch) * h + y * b + by) * w + x * b + bx];
              }
    return Status::Ok();
  });
}

Status TopKReference(const Tensor& in, int64_t axis, bool largest, bool sorted, Tensor* values, Tensor* indices) {
  (void)sorted;  // the sorted order is also a valid unsorted order
  const size_t ax = static_cast<size_t>(axis);
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < ax; ++d) outer *= in.dims()[d];
  for (size_t d = ax + 1; d < in.dims().size(); ++d) inner *= in.dims()[d];
  const int64_t n = in.dims()[ax], k = values->dims()[ax];
  if (k > n || k < 0)
    return InvalidArgument("TopK: k=" + std::to_string(k) + " exceeds axis size " + std::to_string(n));
  return DispatchArithmetic(in.dtype(), [&](auto zero) -> Status {
    using T = decltype(zero);
    const T* src = in.data<T>();
    T* vdst = values->data<T>();
    int64_t* idst = indices->data<int64_t>();
    std::vector<int64_t> order(static_cast<size_t>(n));
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        auto at = [&](int64_t a) { return src[(o * n + a) * inner + i]; };
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(),
                         [&](int64_t x, int64_t y) { return largest ? at(x) > at(y) : at(x) < at(y); });
        for (int64_t s = 0; s < k; ++s) {
          const int64_t p = (o * k + s) * inner + i;
          vdst[p] = at(order[static_cast<size_t>(s)]);
          idst[p] = order[static_cast<size_t>(s)];
        }
      }
    return Status::Ok();
  });
}

Status GatherNDReference(const Tensor& data, const Tensor& indices, int64_t batch_dims, Tensor* out) {
  WH_RETURN_IF_ERROR(CheckIndexType(indices, "GatherND indices"));
  const int r = data.rank(), q = indices.rank();
  const int64_t b = batch_dims;
  if (q < 1 || b < 0 || b >= std::min(q, r)) return InvalidArgument("GatherND: batch_dims out of range");
  const int64_t last = indices.dims().back();
  if (last < 1 || b + last > r) return InvalidArgument("GatherND: indices last dim out of range");
  int64_t batches = 1;
  for (int64_t d = 0; d < b; ++d) batches *= data.dims()[static_cast<size_t>(d)];
  int64_t slice = 1;
  for (int64_t d = b + last; d < r; ++d) slice *= data.dims()[static_cast<size_t>(d)];
  int64_t per_batch_data = slice;
  for (int64_t d = b; d < b + last; ++d) per_batch_data *= data.dims()[static_cast<size_t>(d)];
  const int64_t tuples = batches == 0 || last == 0 ? 0 : indices.numel() / last / batches;
  const std::vector<int64_t> ds = StridesOf(data.dims());
  return ByBytes(data, [&](auto e) -> Status {
    using E = decltype(e);
    const E* src = static_cast<const E*>(data.raw_data());
    E* dst = static_cast<E*>(out->raw_data());
    for (int64_t bt = 0; bt < batches; ++bt)
      for (int64_t t = 0; t < tuples; ++t) {
        int64_t off = bt * per_batch_data;
        for (int64_t j = 0; j < last; ++j) {
          const size_t dd = static_cast<size_t>(b + j);
          WH_ASSIGN_OR_RETURN(int64_t v, FixIndex(ReadIndexElement(indices, (bt * tuples + t) * last + j),
                                                  data.dims()[dd], "GatherND"));
          off += v * ds[dd];
        }
        std::memcpy(dst + (bt * tuples + t) * slice, src + off, static_cast<size_t>(slice) * sizeof(E));
      }
    return Status::Ok();
  });
}

Status ScatterElementsReference(const Tensor& data, const Tensor& indices, const Tensor& updates, int64_t axis,
                                ScatterReduction red, Tensor* out) {
  WH_RETURN_IF_ERROR(CheckIndexType(indices, "ScatterElements indices"));
  if (indices.dims() != updates.dims() || indices.rank() != data.rank())
    return InvalidArgument("ScatterElements: indices " + DimsToString(indices.dims()) + " and updates " +
                           DimsToString(updates.dims()) + " must match and have data's rank");
  std::memcpy(out->raw_data(), data.raw_data(), data.nbytes());
  if (indices.numel() == 0) return Status::Ok();
  const std::vector<int64_t> ds = StridesOf(data.dims());
  const size_t ax = static_cast<size_t>(axis);
  auto run = [&](auto e) -> Status {
    using E = decltype(e);
    const E* up = static_cast<const E*>(updates.raw_data());
    E* dst = static_cast<E*>(out->raw_data());
    std::vector<int64_t> idx(indices.dims().size(), 0);
    int64_t u = 0;
    do {
      int64_t off = 0;
      for (size_t d = 0; d < idx.size(); ++d) {
        if (d == ax) continue;
        if (idx[d] >= data.dims()[d]) return InvalidArgument("ScatterElements: indices shape exceeds data shape");
        off += idx[d] * ds[d];
      }
      WH_ASSIGN_OR_RETURN(int64_t j, FixIndex(ReadIndexElement(indices, u), data.dims()[ax], "ScatterElements"));
      E& slot = dst[off + j * ds[ax]];
      slot = Combine<E>(slot, up[u++], red);
    } while (NextIndex(idx, indices.dims()));
    return Status::Ok();
  };
  if (red == ScatterReduction::kNone) return ByBytes(data, run);
  return DispatchArithmetic(data.dtype(), run);
}

Status ScatterNDReference(const Tensor& data, const Tensor& indices, const Tensor& updates, ScatterReduction red,
                          Tensor* out) {
  WH_RETURN_IF_ERROR(CheckIndexType(indices, "ScatterND indices"));
  const int r = data.rank(), q = indices.rank();
  if (q < 1) return InvalidArgument("ScatterND indices must have rank >= 1");
  const int64_t last = indices.dims().back();
  if (last < 1 || last > r) return InvalidArgument("ScatterND: indices last dim out of range");
  Dims expect(indices.dims().begin(), indices.dims().end() - 1);
  expect.insert(expect.end(), data.dims().begin() + last, data.dims().end());
  if (updates.dims() != expect)
    return InvalidArgument("ScatterND: updates shape " + DimsToString(updates.dims()) + ", expected " +
                           DimsToString(expect));
  std::memcpy(out->raw_data(), data.raw_data(), data.nbytes());
  int64_t slice = 1;
  for (int d = static_cast<int>(last); d < r; ++d) slice *= data.dims()[static_cast<size_t>(d)];
  const int64_t tuples = indices.numel() / last;
  const std::vector<int64_t> ds = StridesOf(data.dims());
  auto run = [&](auto e) -> Status {
    using E = decltype(e);
    const E* up = static_cast<const E*>(updates.raw_data());
    E* dst = static_cast<E*>(out->raw_data());
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t off = 0;
      for (int64_t j = 0; j < last; ++j) {
        const size_t dd = static_cast<size_t>(j);
        WH_ASSIGN_OR_RETURN(int64_t v, FixIndex(ReadIndexElement(indices, t * last + j), data.dims()[dd], "ScatterND"));
        off += v * ds[dd];
      }
      for (int64_t s = 0; s < slice; ++s) dst[off + s] = Combine<E>(dst[off + s], up[t * slice + s], red);
    }
    return Status::Ok();
  };
  if (red == ScatterReduction::kNone) return ByBytes(data, run);
  return DispatchArithmetic(data.dtype(), run);
}

Status NonZeroReference(const Tensor& in, Tensor* out) {
  const int64_t n = in.numel();
  const size_t r = static_cast<size_t>(in.rank());
  std::vector<int64_t> hits;  // flat positions of the non-zero elements
  auto scan = [&](auto zero) {
    using T = decltype(zero);
    const T* p = static_cast<const T*>(in.raw_data());
    for (int64_t i = 0; i < n; ++i)
      if (p[i] != zero) hits.push_back(i);
  };
  switch (in.dtype()) {
    case DType::kFloat32: scan(0.f); break;
    case DType::kFloat64: scan(0.0); break;
    case DType::kFloat16:
    case DType::kBFloat16: {
      const uint16_t* p = static_cast<const uint16_t*>(in.raw_data());
      for (int64_t i = 0; i < n; ++i)
        if ((p[i] & 0x7fffu) != 0) hits.push_back(i);
      break;
    }
    case DType::kBool: scan(false); break;
    case DType::kInt8: scan(int8_t{0}); break;
    case DType::kUInt8: scan(uint8_t{0}); break;
    case DType::kInt16: scan(int16_t{0}); break;
    case DType::kUInt16: scan(uint16_t{0}); break;
    case DType::kInt32: scan(int32_t{0}); break;
    case DType::kUInt32: scan(uint32_t{0}); break;
    case DType::kInt64: scan(int64_t{0}); break;
    case DType::kUInt64: scan(uint64_t{0}); break;
    default: return InvalidArgument(std::string("NonZero: unsupported input type ") + DTypeName(in.dtype()));
  }
  const int64_t count = static_cast<int64_t>(hits.size());
  if (out->dtype() != DType::kInt64 || out->dims() != Dims{static_cast<int64_t>(r), count})
    return InvalidArgument("NonZero: output " + DimsToString(out->dims()) + " does not hold [" + std::to_string(r) +
                           ", " + std::to_string(count) + "] indices");
  int64_t* dst = out->data<int64_t>();
  const std::vector<int64_t> strides = StridesOf(in.dims());
  for (int64_t k = 0; k < count; ++k) {
    int64_t rem = hits[static_cast<size_t>(k)];
    for (size_t d = 0; d < r; ++d) {
      dst[static_cast<int64_t>(d) * count + k] = rem / strides[d];
      rem %= strides[d];
    }
  }
  return Status::Ok();
}

namespace reference {
const IndexFns kIndexFns{SizeReference,         GatherElementsReference, TriluReference,
                         CumSumReference,       EyeLikeReference,        OneHotReference,
                         DepthToSpaceReference, SpaceToDepthReference,   TopKReference,
                         GatherNDReference,     ScatterElementsReference, ScatterNDReference,
                         NonZeroReference};
}  // namespace reference

}  // namespace whittle
