#include "kernels/reference/reduce.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

#include "kernels/common/elementwise_scalar.h"
#include "kernels/common/dtype_dispatch.h"

namespace whittle::reference {

using ew::DataAs;
using ew::Dispatch;
using ew::TypeSet;

const char* ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "ReduceSum";
    case ReduceOp::kMean: return "ReduceMean";
    case ReduceOp::kMax: return "ReduceMax";
    case ReduceOp::kMin: return "ReduceMin";
    case ReduceOp::kProd: return "ReduceProd";
    case ReduceOp::kL1: return "ReduceL1";
    case ReduceOp::kL2: return "ReduceL2";
    case ReduceOp::kSumSquare: return "ReduceSumSquare";
    case ReduceOp::kLogSum: return "ReduceLogSum";
    case ReduceOp::kLogSumExp: return "ReduceLogSumExp";
  }
  return "?";
}

namespace {

// Accumulates one output value from the elements x[base + offs[k]].
template <class T>
T ReduceOne(ReduceOp op, const T* x, int64_t base, const std::vector<int64_t>& offs) {
  const int64_t n = static_cast<int64_t>(offs.size());
  if (op == ReduceOp::kMax || op == ReduceOp::kMin) {
    using L = std::numeric_limits<T>;
    const bool is_max = op == ReduceOp::kMax;
    T m = is_max ? (L::has_infinity ? -L::infinity() : L::lowest()) : (L::has_infinity ? L::infinity() : L::max());
    for (int64_t k = 0; k < n; ++k) m = is_max ? ew::MaxValue(m, x[base + offs[k]]) : ew::MinValue(m, x[base + offs[k]]);
    return m;
  }
  if (op == ReduceOp::kLogSumExp) {
    double mx = -std::numeric_limits<double>::infinity();
    for (int64_t k = 0; k < n; ++k) mx = std::max(mx, static_cast<double>(x[base + offs[k]]));
    if (std::isinf(mx)) return ew::CastValue<T>(mx);
    double s = 0;
    for (int64_t k = 0; k < n; ++k) s += std::exp(static_cast<double>(x[base + offs[k]]) - mx);
    return ew::CastValue<T>(mx + std::log(s));
  }
  // Floats accumulate in double; integers wrap in 64 bits like numpy's fixed-width arithmetic.
  using Acc = std::conditional_t<ew::kIsFloat<T>, double, std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>;
  Acc acc = op == ReduceOp::kProd ? Acc(1) : Acc(0);
  for (int64_t k = 0; k < n; ++k) {
    const Acc v = static_cast<Acc>(x[base + offs[k]]);
    switch (op) {
      case ReduceOp::kProd: acc = ew::WrapMul(acc, v); break;
      case ReduceOp::kL2: case ReduceOp::kSumSquare: acc = ew::WrapAdd(acc, ew::WrapMul(v, v)); break;
      case ReduceOp::kL1:
        if constexpr (std::is_unsigned_v<Acc>) acc = ew::WrapAdd(acc, v);
        else acc = ew::WrapAdd(acc, v < Acc(0) ? ew::WrapSub(Acc(0), v) : v);
        break;
      default: acc = ew::WrapAdd(acc, v); break;
    }
  }
  switch (op) {
    case ReduceOp::kMean:
      if constexpr (ew::kIsFloat<T>) return static_cast<T>(acc / static_cast<double>(n));
      else return n ? static_cast<T>(acc / static_cast<Acc>(n)) : T(0);
    case ReduceOp::kL2: return ew::CastValue<T>(std::sqrt(static_cast<double>(acc)));
    case ReduceOp::kLogSum: return ew::CastValue<T>(std::log(static_cast<double>(acc)));
    default: return static_cast<T>(acc);
  }
}

// Offsets of every combination of coordinates along dims with the given strides.
std::vector<int64_t> Offsets(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides) {
  std::vector<int64_t> offs{0};
  for (size_t d = 0; d < dims.size(); ++d) {
    std::vector<int64_t> next;
    next.reserve(offs.size() * static_cast<size_t>(dims[d]));
    for (int64_t o : offs)
      for (int64_t i = 0; i < dims[d]; ++i) next.push_back(o + i * strides[d]);
    offs = std::move(next);
  }
  return offs;
}

}  // namespace

Status Reduce(ReduceOp op, const Tensor& x, const std::vector<int64_t>& axes, Tensor& out) {
  const Dims& dims = x.dims();
  std::vector<int64_t> kept_dims, kept_strides, red_dims, red_strides;
  int64_t stride = 1;
  std::vector<int64_t> strides(dims.size());
  for (size_t i = dims.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= dims[i];
  }
  for (size_t i = 0; i < dims.size(); ++i) {
    const bool reduced = std::find(axes.begin(), axes.end(), static_cast<int64_t>(i)) != axes.end();
    (reduced ? red_dims : kept_dims).push_back(dims[i]);
    (reduced ? red_strides : kept_strides).push_back(strides[i]);
  }
  if (out.numel() != NumElements(kept_dims) || out.dtype() != x.dtype())
    return Internal("reduction output " + DimsToString(out.dims()) + " does not match input " + DimsToString(dims));
  const std::vector<int64_t> offs = Offsets(red_dims, red_strides);
  const std::vector<int64_t> bases = Offsets(kept_dims, kept_strides);
  return Dispatch<TypeSet::kNumeric>(x.dtype(), ReduceOpName(op), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = DataAs<T>(x);
    T* po = DataAs<T>(out);
    for (size_t o = 0; o < bases.size(); ++o) po[o] = ReduceOne(op, px, bases[o], offs);
    return Status::Ok();
  });
}

Status ArgReduce(bool is_max, const Tensor& x, int64_t axis, bool select_last, Tensor& out) {
  WH_ASSIGN_OR_RETURN(AxisSplit s, SplitAtAxis(x.dims(), axis, false));
  if (s.n == 0) return InvalidArgument("cannot take ArgMax/ArgMin over an empty axis");
  if (out.dtype() != DType::kInt64 || out.numel() != s.outer * s.inner) return Internal("ArgMax/ArgMin output mismatch");
  return Dispatch<TypeSet::kNumeric>(x.dtype(), is_max ? "ArgMax" : "ArgMin", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = DataAs<T>(x);
    int64_t* po = out.data<int64_t>();
    for (int64_t o = 0; o < s.outer; ++o) {
      for (int64_t i = 0; i < s.inner; ++i) {
        const T* p = px + o * s.n * s.inner + i;
        int64_t best = 0;
        for (int64_t k = 1; k < s.n; ++k) {
          const T v = p[k * s.inner], b = p[best * s.inner];
          const bool better = is_max ? (select_last ? v >= b : v > b) : (select_last ? v <= b : v < b);
          if (better) best = k;
        }
        po[o * s.inner + i] = best;
      }
    }
    return Status::Ok();
  });
}

Status Softmax(SoftmaxOp op, const Tensor& x, int64_t axis, bool coerce_2d, Tensor& out) {
  WH_ASSIGN_OR_RETURN(AxisSplit s, SplitAtAxis(x.dims(), axis, coerce_2d));
  if (out.dtype() != x.dtype() || out.numel() != x.numel()) return Internal("softmax output differs from input");
  return Dispatch<TypeSet::kFloat>(x.dtype(), "Softmax", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = DataAs<T>(x);
    T* po = DataAs<T>(out);
    for (int64_t o = 0; o < s.outer; ++o) {
      for (int64_t i = 0; i < s.inner; ++i) {
        const T* p = px + o * s.n * s.inner + i;
        T* q = po + o * s.n * s.inner + i;
        int64_t arg = 0;
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t k = 0; k < s.n; ++k) {
          if (static_cast<double>(p[k * s.inner]) > mx || k == 0) {
            mx = static_cast<double>(p[k * s.inner]);
            arg = k;
          }
        }
        if (op == SoftmaxOp::kHardmax) {
          for (int64_t k = 0; k < s.n; ++k) q[k * s.inner] = k == arg ? T(1) : T(0);
          continue;
        }
        double sum = 0;
        for (int64_t k = 0; k < s.n; ++k) sum += std::exp(static_cast<double>(p[k * s.inner]) - mx);
        for (int64_t k = 0; k < s.n; ++k) {
          const double d = static_cast<double>(p[k * s.inner]) - mx;
          q[k * s.inner] = static_cast<T>(op == SoftmaxOp::kSoftmax ? std::exp(d) / sum : d - std::log(sum));
        }
      }
    }
    return Status::Ok();
  });
}

namespace {
// The table's signature carries a thread budget that plain loops do not use.
Status ReduceRow(ReduceOp op, const Tensor& x, const std::vector<int64_t>& axes, Tensor& out, int) {
  return Reduce(op, x, axes, out);
}
Status ArgReduceRow(bool is_max, const Tensor& x, int64_t axis, bool select_last, Tensor& out, int) {
  return ArgReduce(is_max, x, axis, select_last, out);
}
Status SoftmaxRow(SoftmaxOp op, const Tensor& x, int64_t axis, bool coerce_2d, Tensor& out, int) {
  return Softmax(op, x, axis, coerce_2d, out);
}
}  // namespace

const ReduceFns kReduceFns{ReduceRow, ArgReduceRow, SoftmaxRow};

}  // namespace whittle::reference
