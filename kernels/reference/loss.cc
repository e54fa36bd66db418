#include "kernels/reference/loss.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/common/dtype_dispatch.h"
#include "kernels/reference/index.h"

namespace whittle {
namespace {

template <class T>
Status NllTyped(const T* input, const Tensor& input_t, const Tensor& target, const Tensor* weight,
                const LossOptions& opt, Tensor* out) {
  if (input_t.rank() < 2) return InvalidArgument("loss input must be [N, C, ...], got " + DimsToString(input_t.dims()));
  if (target.dtype() != DType::kInt64 && target.dtype() != DType::kInt32)
    return InvalidArgument(std::string("loss target must be int32 or int64, got ") + DTypeName(target.dtype()));
  const int64_t n = input_t.dim(0), c = input_t.dim(1);
  const int64_t inner = n * c == 0 ? 0 : input_t.numel() / (n * c);
  Dims expect = input_t.dims();
  expect.erase(expect.begin() + 1);
  if (target.dims() != expect)
    return InvalidArgument("loss target shape " + DimsToString(target.dims()) + ", expected " + DimsToString(expect));
  if (weight && (weight->dtype() != input_t.dtype() || weight->dims() != Dims{c}))
    return InvalidArgument("loss weight must be [C] of the input's type, got " + DimsToString(weight->dims()));
  const T* w = weight ? weight->data<T>() : nullptr;
  T* dst = out->data<T>();
  double sum = 0, wsum = 0;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t p = b * inner + i;
      const int64_t t = ReadIndexElement(target, p);
      double l = 0, wt = 0;
      if (!(opt.has_ignore_index && t == opt.ignore_index)) {
        if (t < 0 || t >= c)
          return InvalidArgument("loss target " + std::to_string(t) + " is out of range [0, " + std::to_string(c) +
                                 ")");
        wt = w ? static_cast<double>(w[t]) : 1.0;
        l = -static_cast<double>(input[(b * c + t) * inner + i]) * wt;
      }
      if (opt.reduction == LossReduction::kNone) dst[p] = static_cast<T>(l);
      sum += l;
      wsum += wt;
    }
  if (opt.reduction == LossReduction::kSum) dst[0] = static_cast<T>(sum);
  if (opt.reduction == LossReduction::kMean) dst[0] = static_cast<T>(sum / wsum);
  return Status::Ok();
}

template <class Fn>
Status DispatchFloat(DType dt, Fn&& fn) {
  if (dt == DType::kFloat32) return fn(float{});
  if (dt == DType::kFloat64) return fn(double{});
  return Unimplemented(std::string("loss ops support float32 and float64, got ") + DTypeName(dt));
}

}  // namespace

StatusOr<LossReduction> ParseLossReduction(const std::string& s) {
  if (s == "none") return LossReduction::kNone;
  if (s == "sum") return LossReduction::kSum;
  if (s == "mean") return LossReduction::kMean;
  return InvalidArgument("reduction must be none, sum or mean, got '" + s + "'");
}

Status NllLossReference(const Tensor& input, const Tensor& target, const Tensor* weight, const LossOptions& opt,
                        Tensor* out) {
  return DispatchFloat(input.dtype(), [&](auto zero) -> Status {
    using T = decltype(zero);
    return NllTyped<T>(input.data<T>(), input, target, weight, opt, out);
  });
}

Status SoftmaxCrossEntropyReference(const Tensor& scores, const Tensor& labels, const Tensor* weight,
                                    const LossOptions& opt, Tensor* out, Tensor* log_prob) {
  if (scores.rank() < 2) return InvalidArgument("scores must be [N, C, ...], got " + DimsToString(scores.dims()));
  return DispatchFloat(scores.dtype(), [&](auto zero) -> Status {
    using T = decltype(zero);
    const int64_t n = scores.dim(0), c = scores.dim(1);
    const int64_t inner = n * c == 0 ? 0 : scores.numel() / (n * c);
    std::vector<T> lp(static_cast<size_t>(scores.numel()));
    const T* x = scores.data<T>();
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < inner; ++i) {
        auto at = [&](int64_t k) { return static_cast<size_t>((b * c + k) * inner + i); };
        double mx = -INFINITY;
        for (int64_t k = 0; k < c; ++k) mx = std::max(mx, static_cast<double>(x[at(k)]));
        double s = 0;
        for (int64_t k = 0; k < c; ++k) s += std::exp(static_cast<double>(x[at(k)]) - mx);
        const double lse = mx + std::log(s);
        for (int64_t k = 0; k < c; ++k) lp[at(k)] = static_cast<T>(static_cast<double>(x[at(k)]) - lse);
      }
    if (log_prob) {
      T* dst = log_prob->data<T>();
      for (size_t k = 0; k < lp.size(); ++k) dst[k] = lp[k];
    }
    return NllTyped<T>(lp.data(), scores, labels, weight, opt, out);
  });
}

namespace reference {
const LossFns kLossFns{NllLossReference, SoftmaxCrossEntropyReference};
}  // namespace reference

}  // namespace whittle
