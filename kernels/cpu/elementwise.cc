#include "kernels/cpu/elementwise.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/common/broadcast.h"
#include "kernels/common/dtype_dispatch.h"
#include "kernels/common/elementwise_scalar.h"
#include "kernels/common/elementwise_ops.h"
#include "kernels/cpu/vmath.h"
#include "kernels/reference/elementwise.h"

namespace whittle::cpu {

using reference::BinaryOp;
using reference::UnaryOp;

namespace {

// The broadcast of two inputs to the output, with size-1 output axes dropped and adjacent axes
// merged wherever both inputs stay contiguous (or stay broadcast) across them. The last axis is
// the inner run; its input strides are 0 (broadcast scalar) or 1 (contiguous).
struct Plan {
  std::vector<int64_t> dims, sa, sb;
  int64_t total = 0;
};

StatusOr<Plan> MakePlan(const Tensor& a, const Tensor& b, const Dims& out) {
  WH_ASSIGN_OR_RETURN(std::vector<int64_t> sa, ew::BroadcastStrides(a, out));
  WH_ASSIGN_OR_RETURN(std::vector<int64_t> sb, ew::BroadcastStrides(b, out));
  Plan p;
  p.total = NumElements(out);
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t d = out[i];
    if (d == 1) continue;
    if (!p.dims.empty() && p.sa.back() == sa[i] * d && p.sb.back() == sb[i] * d) {
      p.dims.back() *= d;
      p.sa.back() = sa[i];
      p.sb.back() = sb[i];
    } else {
      p.dims.push_back(d);
      p.sa.push_back(sa[i]);
      p.sb.push_back(sb[i]);
    }
  }
  if (p.dims.empty()) {  // one element
    p.dims = {1};
    p.sa = {1};
    p.sb = {1};
  }
  return p;
}

template <class TA, class TB, class TO, class F>
void RunPlan(const Plan& p, const TA* a, const TB* b, TO* o, F f, int threads) {
  const size_t r = p.dims.size();
  const int64_t len = p.dims[r - 1];
  const int64_t isa = p.sa[r - 1], isb = p.sb[r - 1];
  const int64_t rows = p.total / len;
  auto inner = [f, isa, isb](const TA* pa, const TB* pb, TO* po, int64_t n) {
    if (isa && isb) {
      for (int64_t i = 0; i < n; ++i) po[i] = f(pa[i], pb[i]);
    } else if (isa) {
      const TB y = *pb;
      for (int64_t i = 0; i < n; ++i) po[i] = f(pa[i], y);
    } else if (isb) {
      const TA x = *pa;
      for (int64_t i = 0; i < n; ++i) po[i] = f(x, pb[i]);
    } else {
      const TO v = f(*pa, *pb);
      for (int64_t i = 0; i < n; ++i) po[i] = v;
    }
  };
  if (rows == 1) {
    ParallelRange(len, threads, [&](int64_t s, int64_t e) { inner(a + s * isa, b + s * isb, o + s, e - s); });
    return;
  }
  // Rows [r0, r1): find the first row's input offsets, then walk the outer axes incrementally.
  auto do_rows = [&](int64_t r0, int64_t r1) {
    std::vector<int64_t> idx(r - 1, 0);
    int64_t oa = 0, ob = 0, rem = r0;
    for (size_t d = r - 1; d-- > 0;) {
      idx[d] = rem % p.dims[d];
      rem /= p.dims[d];
      oa += idx[d] * p.sa[d];
      ob += idx[d] * p.sb[d];
    }
    for (int64_t row = r0; row < r1; ++row) {
      inner(a + oa, b + ob, o + row * len, len);
      for (size_t d = r - 1; d-- > 0;) {
        ++idx[d];
        oa += p.sa[d];
        ob += p.sb[d];
        if (idx[d] < p.dims[d]) break;
        oa -= p.sa[d] * p.dims[d];
        ob -= p.sb[d] * p.dims[d];
        idx[d] = 0;
      }
    }
  };
  if (threads <= 1 || p.total < kParallelMinElements) {
    do_rows(0, rows);
  } else if (rows >= threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int c = 0; c < threads; ++c) do_rows(rows * c / threads, rows * (c + 1) / threads);
  } else {
    // Few long rows: split each row instead.
    for (int64_t row = 0; row < rows; ++row) {
      int64_t rem = row, oa = 0, ob = 0;
      for (size_t d = r - 1; d-- > 0;) {
        const int64_t i = rem % p.dims[d];
        rem /= p.dims[d];
        oa += i * p.sa[d];
        ob += i * p.sb[d];
      }
      ParallelRange(len, threads, [&](int64_t s, int64_t e) {
        inner(a + oa + s * isa, b + ob + s * isb, o + row * len + s, e - s);
      });
    }
  }
}

template <class T, class F>
Status RunBinary(const Tensor& a, const Tensor& b, Tensor& out, F f, int threads) {
  using TO = decltype(f(T(), T()));
  if (out.dtype() != DTypeOf<TO>()) return Internal("binary output has an unexpected element type");
  WH_ASSIGN_OR_RETURN(Plan p, MakePlan(a, b, out.dims()));
  if (p.total == 0) return Status::Ok();
  RunPlan(p, a.data<T>(), b.data<T>(), out.data<TO>(), f, threads);
  return Status::Ok();
}

template <class T, class F>
Status Compare(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out, int threads, F fallback) {
  switch (op) {
    case BinaryOp::kEqual: return RunBinary<T>(a, b, out, [](T x, T y) { return x == y; }, threads);
    case BinaryOp::kGreater: return RunBinary<T>(a, b, out, [](T x, T y) { return x > y; }, threads);
    case BinaryOp::kLess: return RunBinary<T>(a, b, out, [](T x, T y) { return x < y; }, threads);
    case BinaryOp::kGreaterEqual: return RunBinary<T>(a, b, out, [](T x, T y) { return x >= y; }, threads);
    case BinaryOp::kLessEqual: return RunBinary<T>(a, b, out, [](T x, T y) { return x <= y; }, threads);
    default: return fallback();
  }
}

template <BinaryOp kOp, class T>
Status RunFloatOp(const Tensor& a, const Tensor& b, Tensor& out, int threads) {
  return RunBinary<T>(a, b, out, [](T x, T y) { return ew::FloatBinaryValue(kOp, x, y); }, threads);
}

template <class T>
Status BinaryFloat(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out, int threads) {
  auto fallback = [&] { return reference::Binary(op, a, b, out); };
  switch (op) {
    // The formulas (kernels/common/elementwise_ops.h) with the op a constant, so each loop vectorises.
    case BinaryOp::kAdd: return RunFloatOp<BinaryOp::kAdd, T>(a, b, out, threads);
    case BinaryOp::kSub: return RunFloatOp<BinaryOp::kSub, T>(a, b, out, threads);
    case BinaryOp::kMul: return RunFloatOp<BinaryOp::kMul, T>(a, b, out, threads);
    case BinaryOp::kDiv: return RunFloatOp<BinaryOp::kDiv, T>(a, b, out, threads);
    case BinaryOp::kMax: return RunFloatOp<BinaryOp::kMax, T>(a, b, out, threads);
    case BinaryOp::kMin: return RunFloatOp<BinaryOp::kMin, T>(a, b, out, threads);
    case BinaryOp::kPRelu: return RunFloatOp<BinaryOp::kPRelu, T>(a, b, out, threads);
    case BinaryOp::kPow:
      if (b.numel() == 1 && b.data<T>()[0] == T(2))
        return RunBinary<T>(a, b, out, [](T x, T) { return x * x; }, threads);
      return RunBinary<T>(a, b, out, [](T x, T y) { return std::pow(x, y); }, threads);
    default: return Compare<T>(op, a, b, out, threads, fallback);
  }
}

template <class T>
Status BinaryInt(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out, int threads) {
  auto fallback = [&] { return reference::Binary(op, a, b, out); };
  switch (op) {
    case BinaryOp::kAdd: return RunBinary<T>(a, b, out, [](T x, T y) { return ew::WrapAdd(x, y); }, threads);
    case BinaryOp::kSub: return RunBinary<T>(a, b, out, [](T x, T y) { return ew::WrapSub(x, y); }, threads);
    case BinaryOp::kMul: return RunBinary<T>(a, b, out, [](T x, T y) { return ew::WrapMul(x, y); }, threads);
    case BinaryOp::kMax: return RunBinary<T>(a, b, out, [](T x, T y) { return x >= y ? x : y; }, threads);
    case BinaryOp::kMin: return RunBinary<T>(a, b, out, [](T x, T y) { return x <= y ? x : y; }, threads);
    default: return Compare<T>(op, a, b, out, threads, fallback);
  }
}

Status BinaryBool(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out, int threads) {
  switch (op) {
    case BinaryOp::kAnd: return RunBinary<bool>(a, b, out, [](bool x, bool y) { return x && y; }, threads);
    case BinaryOp::kOr: return RunBinary<bool>(a, b, out, [](bool x, bool y) { return x || y; }, threads);
    case BinaryOp::kXor: return RunBinary<bool>(a, b, out, [](bool x, bool y) { return x != y; }, threads);
    case BinaryOp::kEqual: return RunBinary<bool>(a, b, out, [](bool x, bool y) { return x == y; }, threads);
    default: return reference::Binary(op, a, b, out);
  }
}

}  // namespace

Status Binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out, int threads) {
  if (a.dtype() != b.dtype()) return reference::Binary(op, a, b, out);  // Pow with a mixed exponent type
  switch (a.dtype()) {
    case DType::kFloat32: return BinaryFloat<float>(op, a, b, out, threads);
    case DType::kFloat64: return BinaryFloat<double>(op, a, b, out, threads);
    case DType::kInt32: return BinaryInt<int32_t>(op, a, b, out, threads);
    case DType::kInt64: return BinaryInt<int64_t>(op, a, b, out, threads);
    case DType::kBool: return BinaryBool(op, a, b, out, threads);
    default: return reference::Binary(op, a, b, out);
  }
}

Status Variadic(BinaryOp op, bool mean, const std::vector<const Tensor*>& inputs, Tensor& out, int threads) {
  bool all_same = out.dtype() == DType::kFloat32;
  for (const Tensor* t : inputs) all_same = all_same && t->dtype() == out.dtype() && t->dims() == out.dims();
  if (!all_same) {
    if (inputs.size() == 2 && !mean) return Binary(op, *inputs[0], *inputs[1], out, threads);
    return reference::Variadic(op, mean, inputs, out);
  }
  if (op != BinaryOp::kAdd && op != BinaryOp::kMax && op != BinaryOp::kMin)
    return reference::Variadic(op, mean, inputs, out);
  float* po = out.data<float>();
  const float scale = mean ? 1.f / static_cast<float>(inputs.size()) : 1.f;
  ParallelRange(out.numel(), threads, [&](int64_t s, int64_t e) {
    // memmove: the runtime may run this in place on input 0's buffer.
    std::memmove(po + s, inputs[0]->data<float>() + s, static_cast<size_t>(e - s) * sizeof(float));
    for (size_t k = 1; k < inputs.size(); ++k) {
      const float* pi = inputs[k]->data<float>();
      if (op == BinaryOp::kAdd) {
        for (int64_t i = s; i < e; ++i) po[i] += pi[i];
      } else if (op == BinaryOp::kMax) {
        for (int64_t i = s; i < e; ++i) po[i] = ew::MaxValue(po[i], pi[i]);
      } else {
        for (int64_t i = s; i < e; ++i) po[i] = ew::MinValue(po[i], pi[i]);
      }
    }
    if (mean)
      for (int64_t i = s; i < e; ++i) po[i] *= scale;
  });
  return Status::Ok();
}

namespace {

using ArrayMap = Eigen::Map<Eigen::ArrayXf>;
using ConstArrayMap = Eigen::Map<const Eigen::ArrayXf>;

template <class G>
void MapFloat(const float* px, float* po, int64_t n, int threads, G g) {
  ParallelRange(n, threads, [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i) po[i] = g(px[i]);
  });
}

template <UnaryOp kOp>
void MapOp(const float* px, float* po, int64_t n, int threads, const reference::UnaryParams& p) {
  MapFloat(px, po, n, threads, [&p](float v) { return ew::UnaryValue(kOp, p, v); });
}

// Eigen's packet math gives vectorised exp/log/tanh/logistic, which plain loops over std::
// functions do not get without -ffast-math.
template <class G>
void MapEigen(const float* px, float* po, int64_t n, int threads, G g) {
  ParallelRange(n, threads, [&](int64_t s, int64_t e) {
    ConstArrayMap in(px + s, e - s);
    ArrayMap o(po + s, e - s);
    g(in, o);
  });
}

// exp/log/erf/tanh/sigmoid/GELU from kernels/cpu/vmath.h (AVX2 or AVX-512, chosen at run time).
void MapVec(VFn fn, const float* px, float* po, int64_t n, int threads) {
  ParallelRange(n, threads, [&](int64_t s, int64_t e) { VMap(fn, px + s, po + s, e - s); });
}

// Mish = x tanh(softplus(x)) = x t / (t + 2) with t = e^x (e^x + 2): one vector exp per element
// (x capped at 20, past which the ratio is 1 in float), in blocks so that y may be x.
void MapMish(const float* px, float* po, int64_t n, int threads) {
  ParallelRange(n, threads, [&](int64_t s, int64_t e) {
    constexpr int64_t kBlock = 256;
    float t[kBlock];
    for (int64_t b = s; b < e; b += kBlock) {
      const int64_t len = std::min(kBlock, e - b);
      for (int64_t i = 0; i < len; ++i) t[i] = std::min(px[b + i], 20.f);
      VMap(VFn::kExp, t, t, len);
      for (int64_t i = 0; i < len; ++i) {
        const float u = t[i] * (t[i] + 2.f);
        po[b + i] = px[b + i] * (u / (u + 2.f));
      }
    }
  });
}

}  // namespace

Status Unary(UnaryOp op, const reference::UnaryParams& p, const Tensor& x, Tensor& out, int threads) {
  if (x.dtype() != DType::kFloat32 || out.dtype() != DType::kFloat32) return reference::Unary(op, p, x, out);
  if (out.numel() != x.numel()) return Internal("unary output size differs from input");
  const float* px = x.data<float>();
  float* po = out.data<float>();
  const int64_t n = x.numel();
  const float alpha = p.alpha;
  switch (op) {
    // The formulas (kernels/common/elementwise_ops.h) with the op a constant, so each loop vectorises.
    case UnaryOp::kRelu: MapOp<UnaryOp::kRelu>(px, po, n, threads, p); break;
    case UnaryOp::kNeg: MapOp<UnaryOp::kNeg>(px, po, n, threads, p); break;
    case UnaryOp::kAbs: MapOp<UnaryOp::kAbs>(px, po, n, threads, p); break;
    case UnaryOp::kReciprocal: MapOp<UnaryOp::kReciprocal>(px, po, n, threads, p); break;
    case UnaryOp::kFloor: MapOp<UnaryOp::kFloor>(px, po, n, threads, p); break;
    case UnaryOp::kCeil: MapOp<UnaryOp::kCeil>(px, po, n, threads, p); break;
    case UnaryOp::kSoftsign: MapOp<UnaryOp::kSoftsign>(px, po, n, threads, p); break;
    case UnaryOp::kLeakyRelu: MapOp<UnaryOp::kLeakyRelu>(px, po, n, threads, p); break;
    case UnaryOp::kHardSigmoid: MapOp<UnaryOp::kHardSigmoid>(px, po, n, threads, p); break;
    case UnaryOp::kHardSwish: MapOp<UnaryOp::kHardSwish>(px, po, n, threads, p); break;
    case UnaryOp::kThresholdedRelu: MapOp<UnaryOp::kThresholdedRelu>(px, po, n, threads, p); break;
    case UnaryOp::kExp: MapVec(VFn::kExp, px, po, n, threads); break;
    case UnaryOp::kLog: MapVec(VFn::kLog, px, po, n, threads); break;
    case UnaryOp::kErf: MapVec(VFn::kErf, px, po, n, threads); break;
    case UnaryOp::kTanh: MapVec(VFn::kTanh, px, po, n, threads); break;
    case UnaryOp::kSigmoid: MapVec(VFn::kSigmoid, px, po, n, threads); break;
    case UnaryOp::kGelu: MapVec(VFn::kGelu, px, po, n, threads); break;
    case UnaryOp::kGeluTanh: MapVec(VFn::kGeluTanh, px, po, n, threads); break;
    case UnaryOp::kMish: MapMish(px, po, n, threads); break;
    case UnaryOp::kSqrt: MapEigen(px, po, n, threads, [](const ConstArrayMap& in, ArrayMap& o) { o = in.sqrt(); }); break;
    case UnaryOp::kElu:
      MapEigen(px, po, n, threads, [alpha](const ConstArrayMap& in, ArrayMap& o) {
        o = (in >= 0.f).select(in, alpha * (in.exp() - 1.f));
      });
      break;
    // Every other float op: its formula, element by element, on the thread budget.
    default: MapFloat(px, po, n, threads, [op, &p](float v) { return ew::UnaryValue(op, p, v); }); break;
  }
  return Status::Ok();
}

Status Clip(const Tensor& x, const Tensor* lo, const Tensor* hi, std::optional<float> lo_attr,
            std::optional<float> hi_attr, Tensor& out, int threads) {
  const bool fast = x.dtype() == DType::kFloat32 && out.dtype() == DType::kFloat32 && out.numel() == x.numel() &&
                    (!lo || (lo->dtype() == DType::kFloat32 && lo->numel() == 1)) &&
                    (!hi || (hi->dtype() == DType::kFloat32 && hi->numel() == 1));
  if (!fast) return reference::Clip(x, lo, hi, lo_attr, hi_attr, out);
  const float lov = lo ? lo->data<float>()[0] : lo_attr.value_or(-std::numeric_limits<float>::infinity());
  const float hiv = hi ? hi->data<float>()[0] : hi_attr.value_or(std::numeric_limits<float>::infinity());
  MapFloat(x.data<float>(), out.data<float>(), x.numel(), threads,
           [lov, hiv](float v) { return std::min(std::max(v, lov), hiv); });
  return Status::Ok();
}

const reference::ElementwiseFns kElementwiseFns{Binary, Unary, Variadic, Clip, nullptr, nullptr};

}  // namespace whittle::cpu
