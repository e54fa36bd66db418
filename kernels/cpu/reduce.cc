#include "kernels/cpu/reduce.h"
#include "kernels/cpu/vmath.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/common/elementwise_scalar.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/reference/reduce.h"

namespace whittle::cpu {

using reference::ReduceOp;
using reference::SoftmaxOp;

namespace {

using ArrayMap = Eigen::Map<Eigen::ArrayXf>;
using ConstArrayMap = Eigen::Map<const Eigen::ArrayXf>;

// x viewed as [outer, reduced, inner] when the reduced axes (ignoring size-1 axes) are one
// contiguous block; false otherwise.
bool ContiguousBlock(const Dims& dims, const std::vector<int64_t>& axes, int64_t* outer, int64_t* red, int64_t* inner) {
  *outer = *red = *inner = 1;
  int phase = 0;  // 0: before the block, 1: inside, 2: after
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 1) continue;
    const bool reduced = std::find(axes.begin(), axes.end(), static_cast<int64_t>(i)) != axes.end();
    if (reduced) {
      if (phase == 2) return false;
      phase = 1;
      *red *= dims[i];
    } else {
      if (phase == 1) phase = 2;
      (phase == 0 ? *outer : *inner) *= dims[i];
    }
  }
  return true;
}

float RowReduce(ReduceOp op, const float* p, int64_t n) {
  const ConstArrayMap r(p, n);
  switch (op) {
    case ReduceOp::kSum: return r.sum();
    case ReduceOp::kMean: return r.sum() / static_cast<float>(n);
    case ReduceOp::kMax: return r.maxCoeff<Eigen::PropagateNaN>();
    case ReduceOp::kMin: return r.minCoeff<Eigen::PropagateNaN>();
    case ReduceOp::kL1: return r.abs().sum();
    case ReduceOp::kL2: return std::sqrt(r.square().sum());
    case ReduceOp::kSumSquare: return r.square().sum();
    case ReduceOp::kLogSum: return std::log(r.sum());
    default: return 0.f;
  }
}

// out[i] (op)= x[r, i] for every r, for i in [i0, i1) of one outer block.
void ColumnReduce(ReduceOp op, const float* x, int64_t red, int64_t inner, int64_t i0, int64_t i1, float* out) {
  const bool is_max = op == ReduceOp::kMax, is_min = op == ReduceOp::kMin;
  const float init = is_max ? -std::numeric_limits<float>::infinity()
                     : is_min ? std::numeric_limits<float>::infinity()
                              : 0.f;
  for (int64_t i = i0; i < i1; ++i) out[i] = init;
  for (int64_t r = 0; r < red; ++r) {
    const float* row = x + r * inner;
    switch (op) {
      case ReduceOp::kMax: for (int64_t i = i0; i < i1; ++i) out[i] = ew::MaxValue(out[i], row[i]); break;
      case ReduceOp::kMin: for (int64_t i = i0; i < i1; ++i) out[i] = ew::MinValue(out[i], row[i]); break;
      case ReduceOp::kL1: for (int64_t i = i0; i < i1; ++i) out[i] += std::fabs(row[i]); break;
      case ReduceOp::kL2: case ReduceOp::kSumSquare:
        for (int64_t i = i0; i < i1; ++i) out[i] += row[i] * row[i];
        break;
      default: for (int64_t i = i0; i < i1; ++i) out[i] += row[i]; break;
    }
  }
  switch (op) {
    case ReduceOp::kMean: {
      const float s = 1.f / static_cast<float>(red);
      for (int64_t i = i0; i < i1; ++i) out[i] *= s;
      break;
    }
    case ReduceOp::kL2: for (int64_t i = i0; i < i1; ++i) out[i] = std::sqrt(out[i]); break;
    case ReduceOp::kLogSum: for (int64_t i = i0; i < i1; ++i) out[i] = std::log(out[i]); break;
    default: break;
  }
}

}  // namespace

Status Reduce(ReduceOp op, const Tensor& x, const std::vector<int64_t>& axes, Tensor& out, int threads) {
  int64_t outer, red, inner;
  const bool fast_op = op != ReduceOp::kProd && op != ReduceOp::kLogSumExp;
  if (!fast_op || x.dtype() != DType::kFloat32 || out.dtype() != DType::kFloat32 || x.numel() == 0 ||
      !ContiguousBlock(x.dims(), axes, &outer, &red, &inner))
    return reference::Reduce(op, x, axes, out);
  if (out.numel() != outer * inner) return Internal("reduction output size does not match the input");
  const float* px = x.data<float>();
  float* po = out.data<float>();
  const bool parallel = threads > 1 && x.numel() >= kParallelMinElements;
  if (inner == 1) {
    if (parallel && outer >= threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
      for (int64_t o = 0; o < outer; ++o) po[o] = RowReduce(op, px + o * red, red);
    } else {
      for (int64_t o = 0; o < outer; ++o) po[o] = RowReduce(op, px + o * red, red);
    }
  } else if (parallel && outer >= threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t o = 0; o < outer; ++o) ColumnReduce(op, px + o * red * inner, red, inner, 0, inner, po + o * inner);
  } else {
    // Few outer blocks (e.g. a reduction over the leading axis): split the columns instead.
    for (int64_t o = 0; o < outer; ++o) {
      auto columns = [&](int64_t s, int64_t e) {
        ColumnReduce(op, px + o * red * inner, red, inner, s, e, po + o * inner);
      };
      if (parallel) ParallelRange(inner, threads, columns, 1024);
      else columns(0, inner);
    }
  }
  return Status::Ok();
}

namespace {

// Softmax/LogSoftmax of one contiguous row.
void SoftmaxRow(SoftmaxOp op, const float* x, float* y, int64_t n) {
  const ConstArrayMap xr(x, n);
  ArrayMap yr(y, n);
  const float mx = xr.maxCoeff();
  if (op == SoftmaxOp::kSoftmax) {
    const float sum = VExpShiftSum(x, y, n, mx);  // vmath.h: exp on AVX2/AVX-512
    yr *= 1.f / sum;
  } else {
    yr = xr - mx;
    yr -= std::log(yr.exp().sum());
  }
}

// Softmax/LogSoftmax of one [n, inner] block along n: vectorised across inner.
void SoftmaxBlock(SoftmaxOp op, const float* x, float* y, int64_t n, int64_t inner, std::vector<float>& scratch) {
  scratch.assign(static_cast<size_t>(2 * inner), 0.f);
  float* mx = scratch.data();
  float* sum = mx + inner;
  std::copy(x, x + inner, mx);
  for (int64_t k = 1; k < n; ++k) {
    const float* row = x + k * inner;
    for (int64_t i = 0; i < inner; ++i) mx[i] = std::max(mx[i], row[i]);
  }
  const ConstArrayMap m(mx, inner);
  ArrayMap s(sum, inner);
  for (int64_t k = 0; k < n; ++k) {
    ArrayMap yr(y + k * inner, inner);
    yr = ConstArrayMap(x + k * inner, inner) - m;
    if (op == SoftmaxOp::kSoftmax) {
      yr = yr.exp();
      s += yr;
    } else {
      s += yr.exp();
    }
  }
  if (op == SoftmaxOp::kSoftmax) {
    s = s.inverse();
    for (int64_t k = 0; k < n; ++k) ArrayMap(y + k * inner, inner) *= s;
  } else {
    s = s.log();
    for (int64_t k = 0; k < n; ++k) ArrayMap(y + k * inner, inner) -= s;
  }
}

}  // namespace

Status Softmax(SoftmaxOp op, const Tensor& x, int64_t axis, bool coerce_2d, Tensor& out, int threads) {
  if (op == SoftmaxOp::kHardmax || x.dtype() != DType::kFloat32 || out.dtype() != DType::kFloat32)
    return reference::Softmax(op, x, axis, coerce_2d, out);
  WH_ASSIGN_OR_RETURN(AxisSplit s, SplitAtAxis(x.dims(), axis, coerce_2d));
  if (out.numel() != x.numel()) return Internal("softmax output differs from input");
  if (x.numel() == 0) return Status::Ok();
  const float* px = x.data<float>();
  float* po = out.data<float>();
  const int64_t block = s.n * s.inner;
  const bool parallel = threads > 1 && x.numel() >= kParallelMinElements && s.outer >= threads;
  if (s.inner == 1) {
    if (parallel) {
#pragma omp parallel for num_threads(threads) schedule(static)
      for (int64_t o = 0; o < s.outer; ++o) SoftmaxRow(op, px + o * block, po + o * block, s.n);
    } else {
      for (int64_t o = 0; o < s.outer; ++o) SoftmaxRow(op, px + o * block, po + o * block, s.n);
    }
    return Status::Ok();
  }
  if (parallel) {
#pragma omp parallel num_threads(threads)
    {
      std::vector<float> scratch;
#pragma omp for schedule(static)
      for (int64_t o = 0; o < s.outer; ++o) SoftmaxBlock(op, px + o * block, po + o * block, s.n, s.inner, scratch);
    }
  } else {
    std::vector<float> scratch;
    for (int64_t o = 0; o < s.outer; ++o) SoftmaxBlock(op, px + o * block, po + o * block, s.n, s.inner, scratch);
  }
  return Status::Ok();
}

const reference::ReduceFns kReduceFns{Reduce, nullptr, Softmax};

}  // namespace whittle::cpu
