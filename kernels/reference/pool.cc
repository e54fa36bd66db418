#include "kernels/reference/pool.h"

#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace whittle::reference {
namespace {

// Calls tap(p, op, pos) for every plane p, output position op and kernel tap of the window, with
// pos[i] the tap's input coordinate on spatial axis i (outside [0, g.in[i]) in the padding).
template <class Tap>
void ForEachWindowTap(int64_t planes, const WindowGeometry& g, Tap&& tap) {
  const int n = g.spatial;
  const int64_t out_size = g.OutSize(), k_size = g.KernelSize();
  int64_t o_idx[kMaxSpatialDims], k_idx[kMaxSpatialDims], pos[kMaxSpatialDims];
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t op = 0; op < out_size; ++op) {
      UnravelIndex(op, g.out, n, o_idx);
      for (int64_t kp = 0; kp < k_size; ++kp) {
        UnravelIndex(kp, g.kernel, n, k_idx);
        for (int i = 0; i < n; ++i) pos[i] = o_idx[i] * g.stride[i] - g.pad_begin[i] + k_idx[i] * g.dilation[i];
        tap(p, op, pos);
      }
    }
}

template <class T>
void MaxPoolRef(int64_t planes, const WindowGeometry& g, bool col_major, const T* x, T* y, int64_t* indices) {
  const int n = g.spatial;
  const int64_t in_size = g.InSize(), out_size = g.OutSize();
  std::vector<T> best(static_cast<size_t>(planes * out_size), std::numeric_limits<T>::lowest());
  std::vector<int64_t> best_at(best.size(), -1);
  ForEachWindowTap(planes, g, [&](int64_t p, int64_t op, const int64_t* pos) {
    int64_t off = 0, cm_off = 0, cm_stride = 1;
    for (int i = 0; i < n; ++i) {
      if (pos[i] < 0 || pos[i] >= g.in[i]) return;
      off = off * g.in[i] + pos[i];
      cm_off += pos[i] * cm_stride;
      cm_stride *= g.in[i];
    }
    const size_t o = static_cast<size_t>(p * out_size + op);
    const T v = x[p * in_size + off];
    if (best_at[o] < 0 || v > best[o]) {
      best[o] = v;
      best_at[o] = col_major ? cm_off : off;
    }
  });
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t op = 0; op < out_size; ++op) {
      const size_t o = static_cast<size_t>(p * out_size + op);
      y[o] = best[o];
      if (indices) indices[o] = best_at[o] < 0 ? -1 : p * in_size + best_at[o];
    }
}

template <class T>
void AveragePoolRef(int64_t planes, const WindowGeometry& g, bool include_pad, const T* x, T* y) {
  const int n = g.spatial;
  const int64_t in_size = g.InSize(), out_size = g.OutSize();
  std::vector<double> sum(static_cast<size_t>(planes * out_size), 0.0);
  std::vector<int64_t> count(sum.size(), 0);
  ForEachWindowTap(planes, g, [&](int64_t p, int64_t op, const int64_t* pos) {
    int64_t off = 0;
    bool inside = true, in_padded = true;
    for (int i = 0; i < n; ++i) {
      inside = inside && pos[i] >= 0 && pos[i] < g.in[i];
      in_padded = in_padded && pos[i] >= -g.pad_begin[i] && pos[i] < g.in[i] + g.pad_end[i];
      off = off * g.in[i] + pos[i];
    }
    const size_t o = static_cast<size_t>(p * out_size + op);
    if (inside) sum[o] += static_cast<double>(x[p * in_size + off]);
    if (include_pad ? in_padded : inside) ++count[o];
  });
  for (size_t o = 0; o < sum.size(); ++o)
    y[o] = count[o] == 0 ? T(0) : static_cast<T>(sum[o] / static_cast<double>(count[o]));
}

template <class T>
void GlobalPoolRef(bool is_max, int64_t planes, int64_t size, const T* x, T* y) {
  for (int64_t p = 0; p < planes; ++p) {
    const T* xp = x + p * size;
    if (is_max) {
      T best = std::numeric_limits<T>::lowest();
      for (int64_t i = 0; i < size; ++i) best = i == 0 || xp[i] > best ? xp[i] : best;
      y[p] = best;
    } else {
      double sum = 0;
      for (int64_t i = 0; i < size; ++i) sum += static_cast<double>(xp[i]);
      y[p] = size == 0 ? T(0) : static_cast<T>(sum / static_cast<double>(size));
    }
  }
}

template <class F>
void DispatchPool(DType t, F&& f) {
  switch (t) {
    case DType::kFloat32: f(float{}); break;
    case DType::kFloat64: f(double{}); break;
    case DType::kInt8: f(int8_t{}); break;
    case DType::kUInt8: f(uint8_t{}); break;
    default: WH_CHECK(false && "unsupported pool dtype");
  }
}

class PoolReferenceKernel : public OpKernel {
 public:
  PoolReferenceKernel(PoolKind kind, WindowAttrs a, bool flag) : kind_(kind), attrs_(std::move(a)), flag_(flag) {}

  Status Compute(KernelContext& ctx) const override {
    const Tensor& x = *ctx.inputs[0];
    if (x.rank() < 3) return InvalidArgument("pool input must have rank >= 3 (N, C, spatial...), got " +
                                             DimsToString(x.dims()));
    if (!PoolSupportsDType(kind_, x.dtype()))
      return Unimplemented(std::string("pooling does not support ") + DTypeName(x.dtype()));
    Tensor& y = *ctx.outputs[0];
    const int64_t planes = x.dim(0) * x.dim(1);
    if (kind_ == PoolKind::kGlobalMax || kind_ == PoolKind::kGlobalAverage) {
      const int64_t size = planes == 0 ? 0 : x.numel() / planes;
      if (y.numel() != planes) return Internal("global pool output " + DimsToString(y.dims()) + " is not [N, C, 1...]");
      DispatchPool(x.dtype(), [&](auto tag) {
        using T = decltype(tag);
        GlobalPoolRef<T>(kind_ == PoolKind::kGlobalMax, planes, size, x.data<T>(), y.data<T>());
      });
      return Status::Ok();
    }
    WindowGeometry g;
    WH_RETURN_IF_ERROR(ResolveWindow(attrs_, x.dims().data() + 2, attrs_.kernel_shape.data(), x.rank() - 2, &g));
    if (y.numel() != planes * g.OutSize())
      return Internal("pool output " + DimsToString(y.dims()) + " does not match the resolved window geometry");
    Tensor* indices = ctx.outputs.size() > 1 ? ctx.outputs[1] : nullptr;
    if (indices && (indices->dtype() != DType::kInt64 || indices->numel() != y.numel()))
      return Internal("MaxPool Indices output must be int64 with the shape of Y");
    DispatchPool(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if (kind_ == PoolKind::kMax)
        MaxPoolRef<T>(planes, g, flag_, x.data<T>(), y.data<T>(), indices ? indices->data<int64_t>() : nullptr);
      else
        AveragePoolRef<T>(planes, g, flag_, x.data<T>(), y.data<T>());
    });
    return Status::Ok();
  }

 private:
  PoolKind kind_;
  WindowAttrs attrs_;
  bool flag_;  // MaxPool: storage_order == 1; AveragePool: count_include_pad
};

KernelOr MakePool(const PoolAttrs& a, const KernelInit&, const PoolFns&) {
  const bool flag = a.kind == PoolKind::kMax ? a.col_major_indices : a.count_include_pad;
  return std::unique_ptr<OpKernel>(std::make_unique<PoolReferenceKernel>(a.kind, a.window, flag));
}

}  // namespace

const PoolFns kPoolFns{&MakePool};

}  // namespace whittle::reference
