// The CPU backend's gradient kernels (kernels/cpu/grad.h): the reference ones' results from
// Eigen products over im2col columns, direct MaxPoolGrad loops (AVX2 2x2 stride-2 rows), and
// images / planes / blocks / slabs spread over num_threads.
#include "kernels/cpu/grad.h"

#include <Eigen/Core>

#include <algorithm>
#include <mutex>
#include <vector>

#include "kernels/common/grad_shape.h"
#include "kernels/common/index.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/pool.h"

namespace whittle {
namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMap = Eigen::Map<const RowMat>;
using MutMap = Eigen::Map<RowMat>;

// Eigen's static blocking/cache parameters must be initialised before concurrent use.
void InitEigenOnce() {
  static std::once_flag once;
  std::call_once(once, [] { Eigen::initParallel(); });
}

// Work of n items is cut into this many contiguous chunks, one per thread.
int64_t NumChunks(int64_t n, int threads) { return std::max<int64_t>(1, std::min<int64_t>(n, threads)); }

// body(begin, end, chunk) for each of `chunks` contiguous ranges of [0, n), in parallel.
template <class Body>
void ForChunks(int64_t n, int64_t chunks, int threads, const Body& body) {
  ParallelFor(chunks, threads, [&](int64_t c) { body(c * n / chunks, (c + 1) * n / chunks, c); });
}

// The column matrix of one image's channels: row c*K + k (channel c, tap k in row-major kernel
// order), column p (output position); entry = X[c, position of tap k in window p], 0 in the padding.
// Calls seg(col_off, x_off, lo, hi) once per (channel, tap, row of output positions along the last
// spatial dim): outputs [lo, hi) of the row read X at x_off + o * stride (the others are padding;
// lo == hi == 0 for a row wholly in the padding), and the row's column entries start at col_off.
template <class Seg>
void ForEachColumnRow(int64_t channels, const WindowGeometry& g, const Seg& seg) {
  if (g.spatial <= 2) {
    // 1-D and 2-D: the same calls in the same order, without an index to unravel per row.
    const Geo2D q = To2D(g);
    const int64_t plane = q.ih * q.iw, out_size = q.oh * q.ow, k_size = q.kh * q.kw;
    if (out_size == 0) return;
    for (int64_t c = 0; c < channels; ++c) {
      for (int64_t kh = 0; kh < q.kh; ++kh) {
        const int64_t off_h = kh * q.dh - q.pt;
        int64_t r_lo, r_hi;
        ValidRange(off_h, q.sh, q.ih, q.oh, &r_lo, &r_hi);
        for (int64_t kw = 0; kw < q.kw; ++kw) {
          const int64_t off_w = kw * q.dw - q.pl;
          int64_t lo, hi;
          ValidRange(off_w, q.sw, q.iw, q.ow, &lo, &hi);
          const int64_t col_row = (c * k_size + kh * q.kw + kw) * out_size;
          for (int64_t r = 0; r < q.oh; ++r) {
            const bool inside = r >= r_lo && r < r_hi;
            seg(col_row + r * q.ow, c * plane + (r * q.sh + off_h) * q.iw + off_w, inside ? lo : 0, inside ? hi : 0);
          }
        }
      }
    }
    return;
  }
  const int n = g.spatial, last = n - 1;
  const int64_t in_size = g.InSize(), out_size = g.OutSize(), k_size = g.KernelSize();
  const int64_t ow = g.out[last], iw = g.in[last];
  if (out_size == 0) return;
  const int64_t rows = out_size / ow;
  int64_t k_idx[kMaxSpatialDims], o_idx[kMaxSpatialDims] = {};
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t kp = 0; kp < k_size; ++kp) {
      UnravelIndex(kp, g.kernel, n, k_idx);
      const int64_t off = k_idx[last] * g.dilation[last] - g.pad_begin[last];
      int64_t lo, hi;
      ValidRange(off, g.stride[last], iw, ow, &lo, &hi);
      const int64_t col_row = (c * k_size + kp) * out_size;
      for (int64_t r = 0; r < rows; ++r) {
        UnravelIndex(r, g.out, last, o_idx);
        int64_t at = 0;
        bool inside = true;
        for (int i = 0; i < last && inside; ++i) {
          const int64_t p = o_idx[i] * g.stride[i] - g.pad_begin[i] + k_idx[i] * g.dilation[i];
          inside = p >= 0 && p < g.in[i];
          at = at * g.in[i] + p;
        }
        seg(col_row + r * ow, c * in_size + at * iw + off, inside ? lo : 0, inside ? hi : 0);
      }
    }
  }
}

// 1x1 windows at stride 1 without padding: the column matrix is X itself (P = X's positions).
bool IsPointwise(const WindowGeometry& g) {
  for (int i = 0; i < g.spatial; ++i)
    if (g.kernel[i] != 1 || g.stride[i] != 1 || g.pad_begin[i] != 0 || g.pad_end[i] != 0) return false;
  return true;
}

// col [channels*K, P] = im2col of x [channels, in...].
void Im2Col(const float* x, int64_t channels, const WindowGeometry& g, float* col) {
  const int64_t ow = g.out[g.spatial - 1], sw = g.stride[g.spatial - 1];
  ForEachColumnRow(channels, g, [&](int64_t col_off, int64_t x_off, int64_t lo, int64_t hi) {
    float* d = col + col_off;
    std::fill(d, d + lo, 0.f);
    if (sw == 1) {
      if (hi > lo) std::copy(x + x_off + lo, x + x_off + hi, d + lo);
    } else {
      for (int64_t o = lo; o < hi; ++o) d[o] = x[x_off + o * sw];
    }
    std::fill(d + hi, d + ow, 0.f);
  });
}

// x [channels, in...] += col2im(col): the adjoint of Im2Col (padding entries are dropped).
void Col2Im(const float* col, int64_t channels, const WindowGeometry& g, float* x) {
  const int64_t sw = g.stride[g.spatial - 1];
  ForEachColumnRow(channels, g, [&](int64_t col_off, int64_t x_off, int64_t lo, int64_t hi) {
    const float* s = col + col_off;
    if (sw == 1) {
      if (hi > lo) {
        float* xs = x + x_off;
        for (int64_t o = lo; o < hi; ++o) xs[o] += s[o];
      }
    } else {
      for (int64_t o = lo; o < hi; ++o) x[x_off + o * sw] += s[o];
    }
  });
}

// MaxPoolGrad on any spatial rank: per output position, its window's taps in row-major order.
void MaxPoolGradND(const WindowGeometry& g, int64_t planes, const float* xd, const float* dyd, float* dxd,
                   int threads) {
  const int n = g.spatial;
  const int64_t in_size = g.InSize(), out_size = g.OutSize(), k_size = g.KernelSize();
  // Each tap's displacement from its window's start, per spatial dim (no divisions per tap).
  std::vector<int64_t> tap(static_cast<size_t>(k_size * n));
  for (int64_t kp = 0; kp < k_size; ++kp) {
    int64_t* t = tap.data() + kp * n;
    UnravelIndex(kp, g.kernel, n, t);
    for (int i = 0; i < n; ++i) t[i] *= g.dilation[i];
  }
  ForChunks(planes, NumChunks(planes, threads), threads, [&](int64_t p0, int64_t p1, int64_t) {
    int64_t o_idx[kMaxSpatialDims], start[kMaxSpatialDims];
    for (int64_t p = p0; p < p1; ++p) {
      const float* xp = xd + p * in_size;
      const float* dyp = dyd + p * out_size;
      float* dxp = dxd + p * in_size;
      std::fill(dxp, dxp + in_size, 0.f);
      for (int64_t op = 0; op < out_size; ++op) {
        UnravelIndex(op, g.out, n, o_idx);
        for (int i = 0; i < n; ++i) start[i] = o_idx[i] * g.stride[i] - g.pad_begin[i];
        // MaxPool's choice (kernels/reference/pool.cc): the first tap inside X in row-major tap
        // order, replaced only by a strictly greater one.
        int64_t best_at = -1;
        float best = 0.f;
        for (int64_t kp = 0; kp < k_size; ++kp) {
          const int64_t* t = tap.data() + kp * n;
          int64_t off = 0;
          bool inside = true;
          for (int i = 0; i < n && inside; ++i) {
            const int64_t q = start[i] + t[i];
            inside = q >= 0 && q < g.in[i];
            off = off * g.in[i] + q;
          }
          if (inside && (best_at < 0 || xp[off] > best)) {
            best = xp[off];
            best_at = off;
          }
        }
        if (best_at >= 0) dxp[best_at] += dyp[op];
      }
    }
  });
}

// MaxPoolGrad on 1-D and 2-D windows (1-D as a height of one): the same choice as MaxPoolGradND
// (the taps inside X form a rectangle of kernel rows x kernel columns, visited in row-major order,
// the first one the initial maximum, replaced only by a strictly greater one) and the same order of
// additions into dX (output positions in row-major order), so the results are bit-identical.
void MaxPoolGrad2D(const Geo2D& g, int64_t planes, const float* xd, const float* dyd, float* dxd, int threads) {
  const int64_t in_size = g.ih * g.iw, out_size = g.oh * g.ow;
  // Per output column: the window's first input column and its kernel columns inside X.
  std::vector<int64_t> col_start(static_cast<size_t>(g.ow)), kw_lo(static_cast<size_t>(g.ow)),
      kw_hi(static_cast<size_t>(g.ow));
  for (int64_t ow = 0; ow < g.ow; ++ow) {
    const auto o = static_cast<size_t>(ow);
    col_start[o] = ow * g.sw - g.pl;
    ValidRange(col_start[o], g.dw, g.iw, g.kw, &kw_lo[o], &kw_hi[o]);
  }
  // 2x2 windows with stride 2 (MaxPool2d(2), the common case): the outputs [full_lo, full_hi) of
  // a row whose windows lie wholly inside X go to MaxPoolGrad2x2Stride2Row (AVX2).
  const bool is_2x2_stride2 = g.kh == 2 && g.kw == 2 && g.sh == 2 && g.sw == 2 && g.dh == 1 && g.dw == 1;
  int64_t full_lo = 0, full_hi = 0;
  if (is_2x2_stride2) {
    while (full_lo < g.ow && kw_lo[static_cast<size_t>(full_lo)] != 0) ++full_lo;
    full_hi = full_lo;
    while (full_hi < g.ow && kw_lo[static_cast<size_t>(full_hi)] == 0 && kw_hi[static_cast<size_t>(full_hi)] == 2)
      ++full_hi;
  }
  ForChunks(planes, NumChunks(planes, threads), threads, [&](int64_t p0, int64_t p1, int64_t) {
    for (int64_t p = p0; p < p1; ++p) {
      const float* xp = xd + p * in_size;
      const float* dyp = dyd + p * out_size;
      float* dxp = dxd + p * in_size;
      std::fill(dxp, dxp + in_size, 0.f);
      for (int64_t oh = 0; oh < g.oh; ++oh) {
        const int64_t row_start = oh * g.sh - g.pt;
        int64_t kh_lo, kh_hi;
        ValidRange(row_start, g.dh, g.ih, g.kh, &kh_lo, &kh_hi);
        if (kh_lo == kh_hi) continue;  // the window lies in the padding rows: dY is dropped
        const int64_t first_row = (row_start + kh_lo * g.dh) * g.iw;
        const float* dyr = dyp + oh * g.ow;
        int64_t skip_lo = 0, skip_hi = 0;  // outputs [skip_lo, skip_hi) done by the 2x2 row kernel
        if (is_2x2_stride2 && kh_lo == 0 && kh_hi == 2 && full_hi > full_lo) {
          const int64_t at = first_row + col_start[static_cast<size_t>(full_lo)];
          if (cpu::MaxPoolGrad2x2Stride2Row(xp + at, xp + at + g.iw, dyr + full_lo, full_hi - full_lo, dxp + at,
                                       dxp + at + g.iw)) {
            skip_lo = full_lo;
            skip_hi = full_hi;
          }
        }
        for (int64_t ow = 0; ow < g.ow; ++ow) {
          if (ow == skip_lo && skip_hi > skip_lo) {
            ow = skip_hi - 1;
            continue;
          }
          const auto o = static_cast<size_t>(ow);
          const int64_t c0 = col_start[o], k0 = kw_lo[o], k1 = kw_hi[o];
          if (k0 == k1) continue;
          int64_t best_at = first_row + c0 + k0 * g.dw;
          float best = xp[best_at];
          for (int64_t kh = kh_lo; kh < kh_hi; ++kh) {
            const int64_t row = (row_start + kh * g.dh) * g.iw + c0;
            for (int64_t kw = k0; kw < k1; ++kw) {
              // Branch-free: which tap wins is data-dependent and mispredicts often.
              const int64_t off = row + kw * g.dw;
              const float v = xp[off];
              const bool greater = v > best;
              best = greater ? v : best;
              best_at = greater ? off : best_at;
            }
          }
          dxp[best_at] += dyr[ow];
        }
      }
    }
  });
}

// dx = y > 0 ? dy : 0 over n elements (a select the compiler vectorizes; NaN in y gives 0).
void ReluGradRange(const float* y, const float* dy, float* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dx[i] = y[i] > 0.f ? dy[i] : 0.f;
}


Status ConvGradInputCpu(const ConvGradAttrs& a, const Tensor& dy, const Tensor& w, const Tensor& x, Tensor* dx,
                        int num_threads) {
  ConvShape s;
  WH_RETURN_IF_ERROR(ResolveConvGradInput(a, dy, w, x, *dx, &s));
  const int64_t cg = s.in_channels / s.group, mg = s.out_channels / s.group;
  const int64_t k_size = s.geo.KernelSize(), rows = cg * k_size, p_size = s.geo.OutSize();
  const int64_t in_size = s.geo.InSize();
  const float* wd = w.data<float>();
  const float* dyd = dy.data<float>();
  float* dxd = dx->data<float>();
  if (!IsPointwise(s.geo)) std::fill(dxd, dxd + dx->numel(), 0.f);  // Col2Im adds into it
  InitEigenOnce();
  const int threads = std::max(1, num_threads);
  ScopedOmpThreads omp(threads);  // Eigen's team when one chunk runs outside a parallel region
  const bool pointwise = IsPointwise(s.geo);
  ForChunks(s.batch, NumChunks(s.batch, threads), threads, [&](int64_t n0, int64_t n1, int64_t) {
    std::vector<float> col(pointwise ? 0 : static_cast<size_t>(rows * p_size));
    for (int64_t n = n0; n < n1; ++n) {
      for (int64_t grp = 0; grp < s.group; ++grp) {
        const ConstMap wg(wd + grp * mg * rows, mg, rows);
        const ConstMap dyg(dyd + (n * s.out_channels + grp * mg) * p_size, mg, p_size);
        float* dxg = dxd + (n * s.in_channels + grp * cg) * in_size;
        if (pointwise) {  // col2im is the identity: the product is dX's channels
          MutMap(dxg, rows, p_size).noalias() = wg.transpose() * dyg;
        } else {
          MutMap(col.data(), rows, p_size).noalias() = wg.transpose() * dyg;
          Col2Im(col.data(), cg, s.geo, dxg);
        }
      }
    }
  });
  return Status::Ok();
}

Status ConvGradWeightCpu(const ConvGradAttrs& a, const Tensor& x, const Tensor& dy, Tensor* dw, int num_threads) {
  ConvShape s;
  WH_RETURN_IF_ERROR(ResolveConvGradWeight(a, x, dy, *dw, &s));
  const int64_t cg = s.in_channels / s.group, mg = s.out_channels / s.group;
  const int64_t k_size = s.geo.KernelSize(), rows = cg * k_size, p_size = s.geo.OutSize();
  const int64_t in_size = s.geo.InSize(), w_size = dw->numel();
  const float* xd = x.data<float>();
  const float* dyd = dy.data<float>();
  float* dwd = dw->data<float>();
  InitEigenOnce();
  const int threads = std::max(1, num_threads);
  ScopedOmpThreads omp(threads);
  // Chunk 0 accumulates into dW, the others into their own partial sums, added in chunk order.
  const int64_t chunks = NumChunks(s.batch, threads);
  const bool pointwise = IsPointwise(s.geo);
  std::vector<float> partial(static_cast<size_t>((chunks - 1) * w_size));
  ForChunks(s.batch, chunks, threads, [&](int64_t n0, int64_t n1, int64_t c) {
    float* acc = c == 0 ? dwd : partial.data() + (c - 1) * w_size;
    std::fill(acc, acc + w_size, 0.f);
    std::vector<float> col(pointwise ? 0 : static_cast<size_t>(rows * p_size));
    for (int64_t n = n0; n < n1; ++n) {
      for (int64_t grp = 0; grp < s.group; ++grp) {
        const float* xg = xd + (n * s.in_channels + grp * cg) * in_size;
        if (!pointwise) Im2Col(xg, cg, s.geo, col.data());
        const ConstMap colm(pointwise ? xg : col.data(), rows, p_size);  // im2col of a 1x1 is X
        const ConstMap dyg(dyd + (n * s.out_channels + grp * mg) * p_size, mg, p_size);
        MutMap dwg(acc + grp * mg * rows, mg, rows);
        dwg.noalias() += dyg * colm.transpose();
      }
    }
  });
  for (int64_t c = 1; c < chunks; ++c) {
    const float* part = partial.data() + (c - 1) * w_size;
    for (int64_t i = 0; i < w_size; ++i) dwd[i] += part[i];
  }
  return Status::Ok();
}

Status MaxPoolGradCpu(const WindowAttrs& a, const Tensor& x, const Tensor& dy, Tensor* dx, int num_threads) {
  WindowGeometry g;
  WH_RETURN_IF_ERROR(ResolvePoolGrad("MaxPoolGrad", a, x, dy, *dx, &g));
  const int64_t planes = x.dim(0) * x.dim(1);
  const int threads = std::max(1, num_threads);
  if (g.spatial <= 2)
    MaxPoolGrad2D(To2D(g), planes, x.data<float>(), dy.data<float>(), dx->data<float>(), threads);
  else
    MaxPoolGradND(g, planes, x.data<float>(), dy.data<float>(), dx->data<float>(), threads);
  return Status::Ok();
}

Status ReluGradCpu(const Tensor& y, const Tensor& dy, Tensor* dx, int num_threads) {
  WH_RETURN_IF_ERROR(CheckReluGrad(y, dy, *dx));
  const float* yd = y.data<float>();
  const float* dyd = dy.data<float>();
  float* dxd = dx->data<float>();
  const int64_t n = dy.numel();
  constexpr int64_t kParallelMin = int64_t{1} << 16, kBlock = int64_t{1} << 14;
  if (num_threads <= 1 || n < kParallelMin) {
    ReluGradRange(yd, dyd, dxd, n);
    return Status::Ok();
  }
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  ParallelFor(blocks, num_threads, [&](int64_t b) {
    const int64_t lo = b * kBlock;
    ReluGradRange(yd + lo, dyd + lo, dxd + lo, std::min(kBlock, n - lo));
  });
  return Status::Ok();
}

Status AveragePoolGradCpu(const WindowAttrs& a, bool count_include_pad, const Tensor& x, const Tensor& dy,
                          Tensor* dx, int num_threads) {
  WindowGeometry g;
  WH_RETURN_IF_ERROR(ResolvePoolGrad("AveragePoolGrad", a, x, dy, *dx, &g));
  const int n = g.spatial;
  const int64_t planes = x.dim(0) * x.dim(1), in_size = g.InSize(), out_size = g.OutSize(), k_size = g.KernelSize();
  const float* dyd = dy.data<float>();
  float* dxd = dx->data<float>();
  std::fill(dxd, dxd + dx->numel(), 0.f);
  // Each window's divisor as the forward counts it (taps inside X, or inside X and its explicit
  // pads with count_include_pad; never the ceil_mode overhang), then dY / divisor to each tap in X.
  ParallelFor(planes, std::max(1, num_threads), [&](int64_t p) {
    int64_t o_idx[kMaxSpatialDims], k_idx[kMaxSpatialDims], pos[kMaxSpatialDims];
    std::vector<int64_t> taps(static_cast<size_t>(k_size));
    for (int64_t op = 0; op < out_size; ++op) {
      UnravelIndex(op, g.out, n, o_idx);
      int64_t count = 0;
      size_t inside_taps = 0;
      for (int64_t kp = 0; kp < k_size; ++kp) {
        UnravelIndex(kp, g.kernel, n, k_idx);
        bool inside = true, in_padded = true;
        int64_t off = 0;
        for (int i = 0; i < n; ++i) {
          pos[i] = o_idx[i] * g.stride[i] - g.pad_begin[i] + k_idx[i] * g.dilation[i];
          inside = inside && pos[i] >= 0 && pos[i] < g.in[i];
          in_padded = in_padded && pos[i] >= -g.pad_begin[i] && pos[i] < g.in[i] + g.pad_end[i];
          off = off * g.in[i] + pos[i];
        }
        if (inside) taps[inside_taps++] = off;
        if (count_include_pad ? in_padded : inside) ++count;
      }
      if (count == 0) continue;
      const float v = dyd[p * out_size + op] / static_cast<float>(count);
      for (size_t t = 0; t < inside_taps; ++t) dxd[p * in_size + taps[t]] += v;
    }
  });
  return Status::Ok();
}

Status GatherGradCpu(int64_t axis, const Tensor& x, const Tensor& indices, const Tensor& dy, Tensor* dx,
                     int num_threads) {
  GatherGradShape s;
  WH_RETURN_IF_ERROR(ResolveGatherGrad(axis, x, indices, dy, *dx, &s));
  const int64_t ni = static_cast<int64_t>(s.idx.size()), n = s.n, inner = s.inner;
  const float* dyd = dy.data<float>();
  float* dxd = dx->data<float>();
  std::fill(dxd, dxd + dx->numel(), 0.f);
  // Parallel over the outer blocks: each writes its own slab of dX; within one, indices in order.
  ParallelFor(s.outer, std::max(1, num_threads), [&](int64_t o) {
    for (int64_t j = 0; j < ni; ++j) {
      const float* src = dyd + (o * ni + j) * inner;
      float* dst = dxd + (o * n + s.idx[static_cast<size_t>(j)]) * inner;
      for (int64_t k = 0; k < inner; ++k) dst[k] += src[k];
    }
  });
  return Status::Ok();
}

}  // namespace

namespace cpu {
const GradFns kGradFns{ConvGradInputCpu, ConvGradWeightCpu, MaxPoolGradCpu, ReluGradCpu, AveragePoolGradCpu,
                       GatherGradCpu};
}  // namespace cpu

}  // namespace whittle
