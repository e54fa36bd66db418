#include "kernels/reference/pool.h"

#include <limits>
#include <memory>
#include <string>

namespace whittle::reference {
namespace {

template <class T>
void MaxPoolRef(int64_t planes, const WindowGeometry& g, bool col_major, const T* x, T* y, int64_t* indices) {
  const int n = g.spatial;
  const int64_t in_size = g.InSize(), out_size = g.OutSize(), k_size = g.KernelSize();
  int64_t o_idx[kMaxSpatialDims], k_idx[kMaxSpatialDims];
  for (int64_t p = 0; p < planes; ++p) {
    const T* xp = x + p * in_size;
    for (int64_t op = 0; op < out_size; ++op) {
      UnravelIndex(op, g.out, n, o_idx);
      T best = std::numeric_limits<T>::lowest();
      int64_t best_at = -1;
      for (int64_t kp = 0; kp < k_size; ++kp) {
        UnravelIndex(kp, g.kernel, n, k_idx);
        int64_t off = 0, cm_off = 0, cm_stride = 1;
        bool inside = true;
        for (int i = 0; i < n && inside; ++i) {
          const int64_t pos = o_idx[i] * g.stride[i] - g.pad_begin[i] + k_idx[i] * g.dilation[i];
          inside = pos >= 0 && pos < g.in[i];
          off = off * g.in[i] + pos;
          cm_off += pos * cm_stride;
          cm_stride *= g.in[i];
        }
        if (!inside) continue;
        if (best_at < 0 || xp[off] > best) {
          best = xp[off];
          best_at = col_major ? cm_off : off;
        }
      }
      y[p * out_size + op] = best;
      if (indices) indices[p * out_size + op] = best_at < 0 ? -1 : p * in_size + best_at;
    }
  }
}

template <class T>
void AveragePoolRef(int64_t planes, const WindowGeometry& g, bool include_pad, const T* x, T* y) {
  const int n = g.spatial;
  const int64_t in_size = g.InSize(), out_size = g.OutSize(), k_size = g.KernelSize();
  int64_t o_idx[kMaxSpatialDims], k_idx[kMaxSpatialDims];
  for (int64_t p = 0; p < planes; ++p) {
    const T* xp = x + p * in_size;
    for (int64_t op = 0; op < out_size; ++op) {
      UnravelIndex(op, g.out, n, o_idx);
      double sum = 0;
      int64_t count = 0;
      for (int64_t kp = 0; kp < k_size; ++kp) {
        UnravelIndex(kp, g.kernel, n, k_idx);
        int64_t off = 0;
        bool inside = true, in_padded = true;
        for (int i = 0; i < n; ++i) {
          const int64_t pos = o_idx[i] * g.stride[i] - g.pad_begin[i] + k_idx[i] * g.dilation[i];
          inside = inside && pos >= 0 && pos < g.in[i];
          in_padded = in_padded && pos >= -g.pad_begin[i] && pos < g.in[i] + g.pad_end[i];
          off = off * g.in[i] + pos;
        }
        if (inside) sum += static_cast<double>(xp[off]);
        if (include_pad ? in_padded : inside) ++count;
      }
      y[p * out_size + op] = count == 0 ? T(0) : static_cast<T>(sum / static_cast<double>(count));
    }
  }
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
