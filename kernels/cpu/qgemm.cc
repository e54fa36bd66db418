// The int16 int8-GEMM kernel (see kernels/cpu/qgemm.h): packing, the 6x16 micro-kernel, the
// int16 conv packing without im2col copies, and the padded-pitch compaction.
#include "kernels/cpu/qgemm.h"

#include <algorithm>
#include <cstring>

#include "kernels/common/index.h"
#include "kernels/cpu/isa/qgemm_kernels.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/qgemm_tile.h"

namespace whittle {
namespace {

// The drivers' shared internals (epilogue state, tiling, loads and stores).
using namespace qgemm_internal;  // NOLINT(build/namespaces)

int32_t ZpAt(const std::vector<int32_t>* zp, int64_t i) {
  if (!zp) return 0;
  return zp->size() == 1 ? (*zp)[0] : (*zp)[static_cast<size_t>(i)];
}

// tile[R][kQNr] (row stride ldt) = R rows of A (row stride lda int16) * B panel over kpairs
// k-pairs. R < kQMr for the last row panel (and for single-row GEMVs at batch 1), so no work is
// spent on A's zero padding rows. The scalar form; the vector ones are QKernels()->tile16.
void MicroKernel(int64_t R, const int16_t* ap, int64_t lda, const int16_t* bp, int64_t kpairs, int32_t* tile,
                 int64_t ldt) {
  static_assert(kQNr == 16, "micro-kernel shape");
  ZeroTileRows(R, kQNr, tile, ldt);
  for (int64_t kk = 0; kk < kpairs; ++kk) {
    for (int64_t i = 0; i < R; ++i) {
      const int32_t x0 = ap[i * lda + 2 * kk], x1 = ap[i * lda + 2 * kk + 1];
      for (int64_t j = 0; j < kQNr; ++j)
        tile[i * ldt + j] = WrapAdd(tile[i * ldt + j], x0 * bp[2 * j] + x1 * bp[2 * j + 1]);
    }
    bp += 2 * kQNr;
  }
}

// Row r of a byte matrix minus zero points (one, or per column) as int16.
template <class T>
void RowToInt16(const T* src, int64_t n, const std::vector<int32_t>* zp, int64_t zp_offset, bool zp_per_col,
                int16_t* dst) {
  if (!zp_per_col) {
    const int16_t z = static_cast<int16_t>(zp ? (*zp)[0] : 0);
    for (int64_t j = 0; j < n; ++j) dst[j] = static_cast<int16_t>(static_cast<int16_t>(src[j]) - z);
  } else {
    const int32_t* z = zp->data() + zp_offset;
    for (int64_t j = 0; j < n; ++j) dst[j] = static_cast<int16_t>(static_cast<int32_t>(src[j]) - z[j]);
  }
}

void ByteRowToInt16(const void* src, DType dt, int64_t n, const std::vector<int32_t>* zp, int64_t zp_offset,
                    bool zp_per_col, int16_t* dst) {
  if (dt == DType::kUInt8) RowToInt16(static_cast<const uint8_t*>(src), n, zp, zp_offset, zp_per_col, dst);
  else RowToInt16(static_cast<const int8_t*>(src), n, zp, zp_offset, zp_per_col, dst);
}

// Interleaves int16 rows r0 (k) and r1 (k + 1) of n columns (r1 may be null: zeros) into the
// panel layout at k-pair kk: dst + panel * kQNr * Kp + kk * 2 * kQNr.
void InterleavePair(const int16_t* r0, const int16_t* r1, int64_t n, int64_t Kp, int64_t kk, int16_t* dst) {
  const qgemm_internal::QIsaKernels* isa = qgemm_internal::QKernels();
  int64_t j = isa ? isa->interleave_pair(r0, r1, n, Kp, kk, dst) : 0;
  for (; j < RoundUp(n, kQNr); ++j) {  // the last panel's padding columns are zeros
    int16_t* d = dst + (j / kQNr) * kQNr * Kp + kk * 2 * kQNr + (j % kQNr) * 2;
    d[0] = j < n ? r0[j] : int16_t{0};
    d[1] = j < n && r1 ? r1[j] : int16_t{0};
  }
}

// dst[0, n) = 0; may write up to 15 elements past n (see CopyRowOvershoot).
inline void ZeroRowOvershoot(int64_t n, int16_t* dst) {
  // 16-element chunks of fixed size (no library call); the first two unrolled: a plain loop
  // becomes a memset call, too slow for short rows.
  static const int16_t kZeros[16] = {};
  if (n > 0) std::memcpy(dst, kZeros, sizeof(kZeros));
  if (n > 16) std::memcpy(dst + 16, kZeros, sizeof(kZeros));
  for (int64_t j = 32; j < n; j += 16) std::memcpy(dst + j, kZeros, sizeof(kZeros));
}

// dst[0, n) = src[0, n); may write up to 15 elements past n (the caller's buffers are padded and
// overwrite them later). Short rows are the common case: 16-element chunks of fixed size, no
// library call per row.
inline void CopyRowOvershoot(const int16_t* src, int64_t n, int16_t* dst) {
  auto copy16 = [&](int64_t j) { std::memcpy(dst + j, src + j, 16 * sizeof(int16_t)); };
  // The first two chunks unrolled: a plain loop becomes a memcpy call, too slow for short rows.
  if (n > 0) copy16(0);
  if (n > 16) copy16(16);
  for (int64_t j = 32; j < n; j += 16) copy16(j);
}

}  // namespace

void QPackA(const QMatrix& a, int64_t M, int64_t K, QPackedA* out, int threads) {
  out->M = M;
  out->K = K;
  out->Kp = RoundUp(K, 2);
  const int64_t Kp = out->Kp;
  out->data.assign(static_cast<size_t>(RoundUp(M, kQMr) * Kp), 0);
  const bool per_row = a.zero_point && a.zero_point->size() > 1;
  const size_t es = 1;
  ParallelFor(M, M * K >= (1 << 17) ? threads : 1, [&](int64_t i) {
    const std::vector<int32_t> zp{ZpAt(a.zero_point, per_row ? i : 0)};
    ByteRowToInt16(static_cast<const char*>(a.data) + static_cast<size_t>(i * a.ld) * es, a.dtype, K, &zp, 0, false,
                   out->data.data() + i * Kp);
  });
}

void QPackB(const QMatrix& b, int64_t K, int64_t N, QPackedB* out, int threads) {
  out->K = K;
  out->N = N;
  out->Kp = RoundUp(K, 2);
  const int64_t Kp = out->Kp;
  out->data.resize(static_cast<size_t>(RoundUp(N, kQNr) * Kp));  // InterleavePair writes every element
  const bool per_col = b.zero_point && b.zero_point->size() > 1;
  ParallelFor(Kp / 2, K * N >= (1 << 17) ? threads : 1, [&](int64_t kk) {
    std::vector<int16_t> r0(static_cast<size_t>(N)), r1(static_cast<size_t>(N));
    const char* base = static_cast<const char*>(b.data);
    ByteRowToInt16(base + 2 * kk * b.ld, b.dtype, N, b.zero_point, 0, per_col, r0.data());
    const bool has1 = 2 * kk + 1 < K;
    if (has1) ByteRowToInt16(base + (2 * kk + 1) * b.ld, b.dtype, N, b.zero_point, 0, per_col, r1.data());
    InterleavePair(r0.data(), has1 ? r1.data() : nullptr, N, Kp, kk, out->data.data());
  });
}

void QPackIm2Col(const ConvShape& s, const void* x_image, DType x_dtype, int32_t x_zp, int64_t group,
                 QPackedB* out) {
  const WindowGeometry& g = s.geo;
  const int64_t cg = s.in_channels / s.group, ksize = g.KernelSize(), in_size = g.InSize();
  const int64_t K = cg * ksize, N = g.OutSize();
  out->K = K;
  out->N = N;
  out->Kp = RoundUp(K, 2);
  const int64_t Kp = out->Kp;
  out->data.resize(static_cast<size_t>(RoundUp(N, kQNr) * Kp));  // InterleavePair writes every element
  // Each im2col row (channel, tap) is built as int16 (x - x_zp, 0 in the padding), then pairs of
  // rows are interleaved into the panels.
  // Both padded for CopyRowOvershoot.
  std::vector<int16_t> rows(static_cast<size_t>(2 * N + 16));
  std::vector<int16_t> xrow(static_cast<size_t>(in_size + 16));
  const std::vector<int32_t> zp{x_zp};
  int64_t k_idx[kMaxSpatialDims], o_idx[kMaxSpatialDims];
  int64_t cur_c = -1;
  for (int64_t k = 0; k < Kp; ++k) {
    int16_t* dst = rows.data() + (k & 1) * N;
    if (k < K) {
      const int64_t c = k / ksize, t = k % ksize;
      if (c != cur_c) {  // the channel's plane as int16 once
        ByteRowToInt16(static_cast<const char*>(x_image) + (group * cg + c) * in_size, x_dtype, in_size, &zp, 0, false,
                       xrow.data());
        cur_c = c;
      }
      UnravelIndex(t, g.kernel, g.spatial, k_idx);
      if (g.spatial == 2) {
        const int64_t sw = g.stride[1], off = k_idx[1] * g.dilation[1] - g.pad_begin[1];
        // Outputs [lo, hi) of a row read inside the input row (iw = ow * sw + off); the rest is padding.
        const int64_t lo = std::min(g.out[1], off >= 0 ? 0 : (-off + sw - 1) / sw);
        const int64_t hi = std::max(lo, std::min(g.out[1], g.in[1] - 1 - off < 0 ? 0 : (g.in[1] - 1 - off) / sw + 1));
        for (int64_t oh = 0; oh < g.out[0]; ++oh) {
          const int64_t ih = oh * g.stride[0] - g.pad_begin[0] + k_idx[0] * g.dilation[0];
          int16_t* drow = dst + oh * g.out[1];
          if (ih < 0 || ih >= g.in[0]) {
            ZeroRowOvershoot(g.out[1], drow);
            continue;
          }
          const int16_t* srow = xrow.data() + ih * g.in[1] + off;
          // Left padding first, then the copy, then the right padding; each may overshoot into
          // later positions that are written afterwards (no memset/memcpy call per short row).
          ZeroRowOvershoot(lo, drow);
          if (sw == 1) {
            CopyRowOvershoot(srow + lo, hi - lo, drow + lo);
          } else {
            for (int64_t ow = lo; ow < hi; ++ow) drow[ow] = srow[ow * sw];
          }
          ZeroRowOvershoot(g.out[1] - hi, drow + hi);
        }
      } else {
        for (int64_t o = 0; o < N; ++o) {
          UnravelIndex(o, g.out, g.spatial, o_idx);
          int64_t off = 0;
          const bool inside = TapOffset(g, o_idx, k_idx, &off);
          dst[o] = inside ? xrow[static_cast<size_t>(off)] : int16_t{0};
        }
      }
    }
    if (k & 1) InterleavePair(rows.data(), k < K ? rows.data() + N : nullptr, N, Kp, k / 2, out->data.data());
  }
}

bool QConvUsesPaddedPlanes(const ConvShape& s) {
  const WindowGeometry& g = s.geo;
  if (g.spatial != 2 || g.stride[0] != 1 || g.stride[1] != 1) return false;
  const int64_t hp = g.in[0] + g.pad_begin[0] + g.pad_end[0], wp = g.in[1] + g.pad_begin[1] + g.pad_end[1];
  // Stride 1: the output spans the padded plane minus the dilated kernel.
  return g.out[0] == hp - g.dilation[0] * (g.kernel[0] - 1) && g.out[1] == wp - g.dilation[1] * (g.kernel[1] - 1);
}

void QPackConvPadded(const ConvShape& s, const void* x_image, DType x_dtype, int32_t x_zp, int64_t group,
                     std::vector<int16_t>* planes, QPackedB* out, int64_t* pitch) {
  const WindowGeometry& g = s.geo;
  const int64_t cg = s.in_channels / s.group, taps = g.KernelSize();
  const int64_t hp = g.in[0] + g.pad_begin[0] + g.pad_end[0], wp = g.in[1] + g.pad_begin[1] + g.pad_end[1];
  // Slices start at most (KH-1)*dh rows + (KW-1)*dw into a plane and run OH * Wp elements: the
  // last one ends (KW-1)*dw past the plane, inside this slack.
  const int64_t plane = hp * wp + g.dilation[1] * (g.kernel[1] - 1) + 16;
  const int64_t N = g.out[0] * wp, K = cg * taps;
  planes->assign(static_cast<size_t>(cg * plane), 0);
  const std::vector<int32_t> zp{x_zp};
  // Each channel is converted in one vectorizable pass, then its rows are placed with 16-element
  // copies whose overshoot is re-zeroed right after (padding must read as 0; later rows overwrite
  // the rest), so short rows cost no library call and no scalar tail.
  std::vector<int16_t> conv(static_cast<size_t>(g.InSize() + 16));
  for (int64_t c = 0; c < cg; ++c) {
    const char* src = static_cast<const char*>(x_image) + (group * cg + c) * g.InSize();
    ByteRowToInt16(src, x_dtype, g.InSize(), &zp, 0, false, conv.data());
    int16_t* dst = planes->data() + c * plane + g.pad_begin[0] * wp + g.pad_begin[1];
    for (int64_t ih = 0; ih < g.in[0]; ++ih) {
      CopyRowOvershoot(conv.data() + ih * g.in[1], g.in[1], dst + ih * wp);
      ZeroRowOvershoot(16, dst + ih * wp + g.in[1]);
    }
  }
  out->K = K;
  out->N = N;
  out->Kp = RoundUp(K, 2);
  out->data.resize(static_cast<size_t>(RoundUp(N, kQNr) * out->Kp));  // InterleavePair writes every element
  auto row = [&](int64_t k) -> const int16_t* {
    const int64_t c = k / taps, t = k % taps;
    const int64_t kh = t / g.kernel[1], kw = t % g.kernel[1];
    return planes->data() + c * plane + kh * g.dilation[0] * wp + kw * g.dilation[1];
  };
  for (int64_t kk = 0; kk < out->Kp / 2; ++kk)
    InterleavePair(row(2 * kk), 2 * kk + 1 < K ? row(2 * kk + 1) : nullptr, N, out->Kp, kk, out->data.data());
  *pitch = wp;
}

void QCompactConvRows(const void* tmp, int64_t rows, int64_t oh, int64_t ow, int64_t pitch, size_t elem_size, void* y) {
  const char* src = static_cast<const char*>(tmp);
  char* dst = static_cast<char*>(y);
  const size_t run = static_cast<size_t>(ow) * elem_size;
  const int64_t runs = rows * oh;
  for (int64_t i = 0; i < runs; ++i) {
    const char* s = src + static_cast<size_t>(i * pitch) * elem_size;
    char* d = dst + static_cast<size_t>(i) * run;
    // 16- or 8-byte chunks, each shorter than a run: the overshoot lands on the next run (written
    // next) and the reads stay inside the next source row. The last run is exact: past it lies
    // memory another thread may be writing.
    if (i + 1 < runs && run >= 16) {
      for (size_t b = 0; b < run; b += 16)
        std::memcpy(d + b, s + b, 16);
      continue;
    }
    if (i + 1 < runs && run >= 8) {
      for (size_t b = 0; b < run; b += 8)
        std::memcpy(d + b, s + b, 8);
      continue;
    }
    std::memcpy(d, s, run);
  }
}

void QGemmPacked(const QPackedA& a, const QPackedB& b, const QOutput& out, bool channel_is_row,
                 int64_t channel_offset, void* y, int64_t ldy, int threads) {
  WH_CHECK(a.Kp == b.Kp);
  const int64_t Kp = a.Kp;
  const Epilogue e = MakeEpilogue(out, channel_is_row, channel_offset, a.M, b.N);
  const qgemm_internal::QIsaKernels* isa = qgemm_internal::QKernels();
  qgemm_internal::TiledGemm<kQMr, kQNr>(
      a.M, b.N, Kp, e, y, ldy, threads, [&](int64_t rows, int64_t rp, int64_t cp, int32_t* tile, int64_t ldt) {
        const int16_t* ap = a.data.data() + rp * kQMr * Kp;
        const int16_t* bp = b.data.data() + cp * kQNr * Kp;
        if (isa) isa->tile16(rows, ap, Kp, bp, Kp / 2, tile, ldt);
        else MicroKernel(rows, ap, Kp, bp, Kp / 2, tile, ldt);
      });
}

}  // namespace whittle
