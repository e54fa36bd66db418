#include "kernels/cpu/pool.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/common/window.h"
#include "kernels/cpu/isa/features.h"
#include "kernels/cpu/isa/kernels.h"
#include "kernels/cpu/parallel.h"

namespace whittle::cpu {
namespace {

// Below this much work (taps visited) a pool runs on one thread.
constexpr int64_t kMinParallelWork = 1 << 16;

// out[o] = max of the 2x2 block at columns 2o, 2o+1 of rows r0 and r1 (AVX2 where the CPU runs
// it: kernels/cpu/pool_avx2.cc; max is exact, so the paths agree).
template <typename T>
inline void MaxRow2x2Scalar(const T* r0, const T* r1, int64_t o, int64_t ow, T* out) {
  for (; o < ow; ++o) out[o] = std::max(std::max(r0[2 * o], r0[2 * o + 1]), std::max(r1[2 * o], r1[2 * o + 1]));
}
inline void MaxRow2x2T(const float* r0, const float* r1, int64_t ow, float* out) {
  if (CpuFeatures().Avx2()) return pool_avx2::MaxRow2x2(r0, r1, ow, out);
  MaxRow2x2Scalar(r0, r1, 0, ow, out);
}
inline void MaxRow2x2T(const uint8_t* r0, const uint8_t* r1, int64_t ow, uint8_t* out) {
  MaxRow2x2Scalar(r0, r1, CpuFeatures().Avx2() ? pool_avx2::MaxRow2x2U8(r0, r1, ow, out) : 0, ow, out);
}
inline void MaxRow2x2T(const int8_t* r0, const int8_t* r1, int64_t ow, int8_t* out) {
  MaxRow2x2Scalar(r0, r1, CpuFeatures().Avx2() ? pool_avx2::MaxRow2x2S8(r0, r1, ow, out) : 0, ow, out);
}

// d[i] = max(r0[i], r1[i]) over n 8-bit values.
template <typename T>
inline void VerticalMaxScalar(const T* r0, const T* r1, int64_t i, int64_t n, T* d) {
  for (; i < n; ++i) d[i] = std::max(r0[i], r1[i]);
}
inline void VerticalMax8(const uint8_t* r0, const uint8_t* r1, int64_t n, uint8_t* d) {
  VerticalMaxScalar(r0, r1, CpuFeatures().Avx2() ? pool_avx2::VerticalMaxU8(r0, r1, n, d) : 0, n, d);
}
inline void VerticalMax8(const int8_t* r0, const int8_t* r1, int64_t n, int8_t* d) {
  VerticalMaxScalar(r0, r1, CpuFeatures().Avx2() ? pool_avx2::VerticalMaxS8(r0, r1, n, d) : 0, n, d);
}
inline void VerticalMax8(const float*, const float*, int64_t, float*) {}  // never called: 8-bit planes only

template <typename T>
void MaxPlane(const T* x, const Geo2D& g, T* y) {
  const bool two_by_two = g.kh == 2 && g.kw == 2 && g.sh == 2 && g.sw == 2 && g.dh == 1 && g.dw == 1 &&
                          g.pt == 0 && g.pl == 0 && 2 * g.oh <= g.ih && 2 * g.ow <= g.iw;
  if (two_by_two && sizeof(T) == 1 && g.iw == 2 * g.ow) {
    // 8-bit planes with short rows (the CNN's 28- and 14-wide maps): the vertical max of each row
    // pair into one flat buffer, then a single horizontal pass over all of it, so the vector
    // loop is not cut off at every short row.
    thread_local std::vector<T> rows;
    const int64_t iw = g.iw, oh_n = g.oh;  // locals: byte stores may alias g's fields
    rows.resize(static_cast<size_t>(oh_n * iw));
    T* flat = rows.data();
    for (int64_t oh = 0; oh < oh_n; ++oh) VerticalMax8(x + 2 * oh * iw, x + (2 * oh + 1) * iw, iw, flat + oh * iw);
    MaxRow2x2T(flat, flat, oh_n * g.ow, y);
    return;
  }
  if (two_by_two) {
    for (int64_t oh = 0; oh < g.oh; ++oh) MaxRow2x2T(x + 2 * oh * g.iw, x + (2 * oh + 1) * g.iw, g.ow, y + oh * g.ow);
    return;
  }
  for (int64_t oh = 0; oh < g.oh; ++oh) {
    T* out = y + oh * g.ow;
    for (int64_t o = 0; o < g.ow; ++o) out[o] = std::numeric_limits<T>::lowest();
    int64_t kh0, kh1, kw0, kw1;  // only the taps that land in the input (TapRange)
    TapRange(oh * g.sh - g.pt, g.kh, g.dh, 0, g.ih, &kh0, &kh1);
    TapRange(-g.pl, g.kw, g.dw, -(g.ow - 1) * g.sw, g.iw, &kw0, &kw1);
    for (int64_t kh = kh0; kh < kh1; ++kh) {
      const int64_t ih = oh * g.sh - g.pt + kh * g.dh;
      if (ih < 0 || ih >= g.ih) continue;
      const T* in = x + ih * g.iw;
      for (int64_t kw = kw0; kw < kw1; ++kw) {
        const int64_t off = kw * g.dw - g.pl;
        int64_t lo, hi;
        ValidRange(off, g.sw, g.iw, g.ow, &lo, &hi);
        if (g.sw == 1) {
          const T* src = in + off;
          for (int64_t o = lo; o < hi; ++o) out[o] = std::max(out[o], src[o]);
        } else if (g.sw == 2) {  // a constant stride the compiler vectorizes (ResNet's 3x3/2 stem pool)
          const T* src = in + off;
          for (int64_t o = lo; o < hi; ++o) out[o] = std::max(out[o], src[2 * o]);
        } else {
          for (int64_t o = lo; o < hi; ++o) out[o] = std::max(out[o], in[o * g.sw + off]);
        }
      }
    }
  }
}

void AveragePlane(const float* x, const Geo2D& g, bool include_pad, float* y) {
  for (int64_t oh = 0; oh < g.oh; ++oh) {
    float* out = y + oh * g.ow;
    for (int64_t o = 0; o < g.ow; ++o) out[o] = 0.f;
    const int64_t h0 = oh * g.sh - g.pt;
    int64_t kh0, kh1, kw0, kw1;  // only the taps that land in the input (TapRange)
    TapRange(h0, g.kh, g.dh, 0, g.ih, &kh0, &kh1);
    TapRange(-g.pl, g.kw, g.dw, -(g.ow - 1) * g.sw, g.iw, &kw0, &kw1);
    for (int64_t kh = kh0; kh < kh1; ++kh) {
      const int64_t ih = h0 + kh * g.dh;
      if (ih < 0 || ih >= g.ih) continue;
      const float* in = x + ih * g.iw;
      for (int64_t kw = kw0; kw < kw1; ++kw) {
        const int64_t off = kw * g.dw - g.pl;
        int64_t lo, hi;
        ValidRange(off, g.sw, g.iw, g.ow, &lo, &hi);
        if (g.sw == 1) {
          const float* src = in + off;
          for (int64_t o = lo; o < hi; ++o) out[o] += src[o];
        } else {
          for (int64_t o = lo; o < hi; ++o) out[o] += in[o * g.sw + off];
        }
      }
    }
    const int64_t ch = include_pad ? TapsIn(h0, g.kh, g.dh, -g.pt, g.ih + g.pb) : TapsIn(h0, g.kh, g.dh, 0, g.ih);
    for (int64_t o = 0; o < g.ow; ++o) {
      const int64_t w0 = o * g.sw - g.pl;
      const int64_t cw =
          include_pad ? TapsIn(w0, g.kw, g.dw, -g.pl, g.iw + g.pr) : TapsIn(w0, g.kw, g.dw, 0, g.iw);
      const int64_t count = ch * cw;
      out[o] = count == 0 ? 0.f : out[o] / static_cast<float>(count);
    }
  }
}

class PoolCpuKernel : public OpKernel {
 public:
  PoolCpuKernel(PoolKind kind, WindowAttrs a, bool include_pad, std::unique_ptr<OpKernel> fallback)
      : kind_(kind), attrs_(std::move(a)), include_pad_(include_pad), fallback_(std::move(fallback)) {}

  Status Compute(KernelContext& ctx) const override {
    const Tensor& x = *ctx.inputs[0];
    const bool wants_indices = ctx.outputs.size() > 1 && ctx.outputs[1];
    if (x.rank() < 3 || x.rank() > 4 || wants_indices) return fallback_->Compute(ctx);
    if (x.dtype() == DType::kUInt8 && kind_ == PoolKind::kMax) return WindowMax<uint8_t>(ctx);
    if (x.dtype() == DType::kInt8 && kind_ == PoolKind::kMax) return WindowMax<int8_t>(ctx);
    if (x.dtype() != DType::kFloat32) return fallback_->Compute(ctx);
    Tensor& y = *ctx.outputs[0];
    const float* xp = x.data<float>();
    float* yp = y.data<float>();
    const int64_t planes = x.dim(0) * x.dim(1);
    if (kind_ == PoolKind::kGlobalMax || kind_ == PoolKind::kGlobalAverage) {
      const int64_t size = planes == 0 ? 0 : x.numel() / planes;
      if (y.numel() != planes) return Internal("global pool output " + DimsToString(y.dims()) + " is not [N, C, 1...]");
      const int threads = x.numel() >= kMinParallelWork ? std::max(1, ctx.num_threads) : 1;
      const bool is_max = kind_ == PoolKind::kGlobalMax;
      ParallelFor(planes, threads, [&](int64_t p) {
        const float* v = xp + p * size;
        if (is_max) {
          float m = size > 0 ? v[0] : 0.f;
          for (int64_t i = 1; i < size; ++i) m = std::max(m, v[i]);
          yp[p] = m;
        } else {
          float s = 0.f;
          for (int64_t i = 0; i < size; ++i) s += v[i];
          yp[p] = size > 0 ? s / static_cast<float>(size) : 0.f;
        }
      });
      return Status::Ok();
    }
    WindowGeometry wg;
    WH_RETURN_IF_ERROR(ResolveWindow(attrs_, x.dims().data() + 2, attrs_.kernel_shape.data(), x.rank() - 2, &wg));
    if (y.numel() != planes * wg.OutSize())
      return Internal("pool output " + DimsToString(y.dims()) + " does not match the resolved window geometry");
    const Geo2D g = To2D(wg);
    const int64_t in_plane = g.ih * g.iw, out_plane = g.oh * g.ow;
    // In double: kernel_shape comes from the model (2^62 x 3 overflowed here, fuzzing).
    const double work = static_cast<double>(planes) * static_cast<double>(out_plane) * static_cast<double>(g.kh) *
                        static_cast<double>(g.kw);
    const int threads = work >= static_cast<double>(kMinParallelWork) ? std::max(1, ctx.num_threads) : 1;
    const bool is_max = kind_ == PoolKind::kMax;
    ParallelFor(planes, threads, [&](int64_t p) {
      if (is_max) MaxPlane(xp + p * in_plane, g, yp + p * out_plane);
      else AveragePlane(xp + p * in_plane, g, include_pad_, yp + p * out_plane);
    });
    return Status::Ok();
  }

 private:
  // MaxPool over 8-bit tensors (the quantized CNN's pools run on uint8/int8 between QConv nodes).
  template <typename T>
  Status WindowMax(KernelContext& ctx) const {
    const Tensor& x = *ctx.inputs[0];
    Tensor& y = *ctx.outputs[0];
    WindowGeometry wg;
    WH_RETURN_IF_ERROR(ResolveWindow(attrs_, x.dims().data() + 2, attrs_.kernel_shape.data(), x.rank() - 2, &wg));
    const int64_t planes = x.dim(0) * x.dim(1);
    if (y.numel() != planes * wg.OutSize())
      return Internal("pool output " + DimsToString(y.dims()) + " does not match the resolved window geometry");
    const Geo2D g = To2D(wg);
    const int64_t in_plane = g.ih * g.iw, out_plane = g.oh * g.ow;
    const int threads = planes * out_plane * g.kh * g.kw >= kMinParallelWork ? std::max(1, ctx.num_threads) : 1;
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    ParallelFor(planes, threads, [&](int64_t p) { MaxPlane(xp + p * in_plane, g, yp + p * out_plane); });
    return Status::Ok();
  }

  PoolKind kind_;
  WindowAttrs attrs_;
  bool include_pad_;
  std::unique_ptr<OpKernel> fallback_;  // reference kernel for the cases above
};

// float32 pools and 8-bit MaxPool; the kernel falls back to the reference one (built here from
// `reference`) for Indices outputs and ranks other than 3 and 4. Other dtypes: an ok null kernel.
KernelOr MakePool(const PoolAttrs& a, const KernelInit& init, const PoolFns& reference) {
  const DType dt = init.input_dtypes.empty() ? DType::kUndefined : init.input_dtypes[0];
  const bool eight_bit_max = a.kind == PoolKind::kMax && (dt == DType::kUInt8 || dt == DType::kInt8);
  if (dt != DType::kFloat32 && !eight_bit_max) return std::unique_ptr<OpKernel>();
  if (!reference.pool) return Internal("pooling has no reference kernel to fall back to");
  WH_ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> ref, reference.pool(a, init, reference));
  const bool include_pad = a.kind == PoolKind::kAverage && a.count_include_pad;
  return std::unique_ptr<OpKernel>(std::make_unique<PoolCpuKernel>(a.kind, a.window, include_pad, std::move(ref)));
}

}  // namespace

const PoolFns kPoolFns{&MakePool};

bool MaxPoolGrad2x2Stride2Row(const float* r0, const float* r1, const float* dy, int64_t n, float* d0, float* d1) {
  if (!CpuFeatures().Avx2()) return false;
  pool_grad_avx2::MaxPoolGrad2x2Stride2Row(r0, r1, dy, n, d0, d1);
  return true;
}

}  // namespace whittle::cpu
