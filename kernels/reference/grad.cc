#include "kernels/reference/grad.h"

#include <Eigen/Core>

#include <algorithm>
#include <initializer_list>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/common/index.h"
#include "kernels/cpu/parallel.h"

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

Status CheckFloat32(const char* op, std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    if (t->dtype() != DType::kFloat32)
      return InvalidArgument(std::string(op) + " supports float32 only, got " + DTypeName(t->dtype()));
  return Status::Ok();
}

// dY must be [N, channels, g.out...].
Status CheckDy(const char* op, const Tensor& dy, int64_t batch, int64_t channels, const WindowGeometry& g) {
  Dims want{batch, channels};
  for (int i = 0; i < g.spatial; ++i) want.push_back(g.out[i]);
  if (dy.dims() != want)
    return InvalidArgument(std::string(op) + ": dY " + DimsToString(dy.dims()) + " is not the forward output's shape " +
                           DimsToString(want));
  return Status::Ok();
}

// The column matrix of one image's channels: row c*K + k (channel c, tap k in row-major kernel
// order), column p (output position); entry = X[c, position of tap k in window p], 0 in the padding.
// Calls seg(col_off, x_off, lo, hi) once per (channel, tap, row of output positions along the last
// spatial dim): outputs [lo, hi) of the row read X at x_off + o * stride (the others are padding;
// lo == hi == 0 for a row wholly in the padding), and the row's column entries start at col_off.
template <class Seg>
void ForEachColumnRow(int64_t channels, const WindowGeometry& g, const Seg& seg) {
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

// col [channels*K, P] = im2col of x [channels, in...].
void Im2Col(const float* x, int64_t channels, const WindowGeometry& g, float* col) {
  const int64_t ow = g.out[g.spatial - 1], sw = g.stride[g.spatial - 1];
  ForEachColumnRow(channels, g, [&](int64_t col_off, int64_t x_off, int64_t lo, int64_t hi) {
    float* d = col + col_off;
    std::fill(d, d + lo, 0.f);
    for (int64_t o = lo; o < hi; ++o) d[o] = x[x_off + o * sw];
    std::fill(d + hi, d + ow, 0.f);
  });
}

// x [channels, in...] += col2im(col): the adjoint of Im2Col (padding entries are dropped).
void Col2Im(const float* col, int64_t channels, const WindowGeometry& g, float* x) {
  const int64_t sw = g.stride[g.spatial - 1];
  ForEachColumnRow(channels, g, [&](int64_t col_off, int64_t x_off, int64_t lo, int64_t hi) {
    const float* s = col + col_off;
    for (int64_t o = lo; o < hi; ++o) x[x_off + o * sw] += s[o];
  });
}

}  // namespace

Status ConvGradInputReference(const ConvGradAttrs& a, const Tensor& dy, const Tensor& w, const Tensor& x,
                              Tensor* dx, int num_threads) {
  WH_RETURN_IF_ERROR(CheckFloat32("ConvGradInput", {&dy, &w, &x, dx}));
  ConvShape s;
  WH_RETURN_IF_ERROR(ResolveConvShape(a.window, a.group, x, w, nullptr, &s));
  WH_RETURN_IF_ERROR(CheckDy("ConvGradInput", dy, s.batch, s.out_channels, s.geo));
  if (dx->dims() != x.dims())
    return Internal("ConvGradInput output " + DimsToString(dx->dims()) + " is not X's shape " +
                    DimsToString(x.dims()));
  const int64_t cg = s.in_channels / s.group, mg = s.out_channels / s.group;
  const int64_t k_size = s.geo.KernelSize(), rows = cg * k_size, p_size = s.geo.OutSize();
  const int64_t in_size = s.geo.InSize();
  const float* wd = w.data<float>();
  const float* dyd = dy.data<float>();
  float* dxd = dx->data<float>();
  std::fill(dxd, dxd + dx->numel(), 0.f);
  InitEigenOnce();
  const int threads = std::max(1, num_threads);
  ScopedOmpThreads omp(threads);  // Eigen's team when one chunk runs outside a parallel region
  ForChunks(s.batch, NumChunks(s.batch, threads), threads, [&](int64_t n0, int64_t n1, int64_t) {
    std::vector<float> col(static_cast<size_t>(rows * p_size));
    MutMap colm(col.data(), rows, p_size);
    for (int64_t n = n0; n < n1; ++n) {
      for (int64_t grp = 0; grp < s.group; ++grp) {
        const ConstMap wg(wd + grp * mg * rows, mg, rows);
        const ConstMap dyg(dyd + (n * s.out_channels + grp * mg) * p_size, mg, p_size);
        colm.noalias() = wg.transpose() * dyg;
        Col2Im(col.data(), cg, s.geo, dxd + (n * s.in_channels + grp * cg) * in_size);
      }
    }
  });
  return Status::Ok();
}

Status ConvGradWeightReference(const ConvGradAttrs& a, const Tensor& x, const Tensor& dy, Tensor* dw,
                               int num_threads) {
  WH_RETURN_IF_ERROR(CheckFloat32("ConvGradWeight", {&x, &dy, dw}));
  ConvShape s;
  // dw's dims are W's: the same checks as the forward Conv's.
  WH_RETURN_IF_ERROR(ResolveConvShape(a.window, a.group, x, *dw, nullptr, &s));
  WH_RETURN_IF_ERROR(CheckDy("ConvGradWeight", dy, s.batch, s.out_channels, s.geo));
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
  std::vector<float> partial(static_cast<size_t>((chunks - 1) * w_size));
  ForChunks(s.batch, chunks, threads, [&](int64_t n0, int64_t n1, int64_t c) {
    float* acc = c == 0 ? dwd : partial.data() + (c - 1) * w_size;
    std::fill(acc, acc + w_size, 0.f);
    std::vector<float> col(static_cast<size_t>(rows * p_size));
    const ConstMap colm(col.data(), rows, p_size);
    for (int64_t n = n0; n < n1; ++n) {
      for (int64_t grp = 0; grp < s.group; ++grp) {
        Im2Col(xd + (n * s.in_channels + grp * cg) * in_size, cg, s.geo, col.data());
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

Status MaxPoolGradReference(const WindowAttrs& a, const Tensor& x, const Tensor& dy, Tensor* dx, int num_threads) {
  WH_RETURN_IF_ERROR(CheckFloat32("MaxPoolGrad", {&x, &dy, dx}));
  if (x.rank() < 3) return InvalidArgument("MaxPoolGrad X must have rank >= 3, got " + DimsToString(x.dims()));
  if (a.kernel_shape.size() != static_cast<size_t>(x.rank() - 2))
    return InvalidArgument("MaxPoolGrad kernel_shape has " + std::to_string(a.kernel_shape.size()) +
                           " values for X " + DimsToString(x.dims()));
  WindowGeometry g;
  WH_RETURN_IF_ERROR(ResolveWindow(a, x.dims().data() + 2, a.kernel_shape.data(), x.rank() - 2, &g));
  WH_RETURN_IF_ERROR(CheckDy("MaxPoolGrad", dy, x.dim(0), x.dim(1), g));
  if (dx->dims() != x.dims())
    return Internal("MaxPoolGrad output " + DimsToString(dx->dims()) + " is not X's shape " + DimsToString(x.dims()));
  const int n = g.spatial;
  const int64_t planes = x.dim(0) * x.dim(1), in_size = g.InSize(), out_size = g.OutSize();
  const int64_t k_size = g.KernelSize();
  const float* xd = x.data<float>();
  const float* dyd = dy.data<float>();
  float* dxd = dx->data<float>();
  // Each tap's displacement from its window's start, per spatial dim (no divisions per tap).
  std::vector<int64_t> tap(static_cast<size_t>(k_size * n));
  for (int64_t kp = 0; kp < k_size; ++kp) {
    int64_t* t = tap.data() + kp * n;
    UnravelIndex(kp, g.kernel, n, t);
    for (int i = 0; i < n; ++i) t[i] *= g.dilation[i];
  }
  const int threads = std::max(1, num_threads);
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
  return Status::Ok();
}

namespace reference {
const GradFns kGradFns{ConvGradInputReference, ConvGradWeightReference, MaxPoolGradReference};
}  // namespace reference

}  // namespace whittle
