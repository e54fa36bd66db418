// Implicit-GEMM int8 convolution on channels-last bytes (see QConvNhwc in kernels/cpu/qgemm.h).
// Why: the planar byte path spent about a third of its time outside the micro-kernel (im2col,
// packing the im2col into panels, compacting padded-pitch rows; perf on the residual CNN, AVX2).
// Here the only copies are the padded channels-last image (C * H * W bytes) and the transposed
// output (M * OH * OW), both a fraction of the im2col's kh * kw * C * OH * OW.
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/isa/qgemm_kernels.h"
#include "kernels/cpu/movement.h"  // cpu::TransposeLast2
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/qgemm.h"
#include "kernels/cpu/qgemm_tile.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace whittle {
namespace {

using namespace qgemm_internal;  // NOLINT(build/namespaces)

// dst[j * dst_ld + i] = src[i * src_ld + j] ^ flip for i < rows, j < cols (bytes). 16 x 16
// blocks in SSE2 registers; the last block of a row or column overlaps the one before it
// instead of falling back to single bytes (it rewrites the same values).
void TransposeBytes(const uint8_t* src, int64_t src_ld, int64_t rows, int64_t cols, uint8_t* dst, int64_t dst_ld,
                    uint8_t flip) {
#if defined(__SSE2__)
  if (rows >= 16 && cols >= 16) {
    const __m128i f = _mm_set1_epi8(static_cast<char>(flip));
    for (int64_t i0 = 0; i0 < rows; i0 += 16) {
      const int64_t i = std::min(i0, rows - 16);
      for (int64_t j0 = 0; j0 < cols; j0 += 16) {
        const int64_t j = std::min(j0, cols - 16);
        __m128i r[16], t[16];
        for (int k = 0; k < 16; ++k)
          r[k] = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + (i + k) * src_ld + j)), f);
        // Each round interleaves rows k and k + 8 bytewise: the byte at (row, col) moves to the
        // address rotated left by one bit ([r3 r2 r1 r0 c3 c2 c1 c0] -> [r2 r1 r0 c3 c2 c1 c0 r3]);
        // four rounds swap the row and column nibbles.
        for (int round = 0; round < 4; ++round) {
          for (int k = 0; k < 8; ++k) {
            t[2 * k] = _mm_unpacklo_epi8(r[k], r[k + 8]);
            t[2 * k + 1] = _mm_unpackhi_epi8(r[k], r[k + 8]);
          }
          for (int k = 0; k < 16; ++k) r[k] = t[k];
        }
        for (int k = 0; k < 16; ++k) _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + (j + k) * dst_ld + i), r[k]);
      }
    }
    return;
  }
#endif
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) dst[j * dst_ld + i] = src[i * src_ld + j] ^ flip;
}

// tile = R output positions (A rows at a[i]) x 16 output channels (one B panel at bp): for every
// segment s, seg_quads groups of four bytes from a[i] + seg_off[s]. The scalar form; the vector
// ones are QKernels()->conv_band.
void ConvTile(int64_t R, const uint8_t* const* a, const int64_t* seg_off, int64_t segments, int64_t seg_quads,
              const uint8_t* bp, int32_t* tile, int64_t ldt) {
  ZeroTileRows(R, kQ8Nr, tile, ldt);
  for (int64_t s = 0; s < segments; ++s)
    for (int64_t q = 0; q < seg_quads; ++q) {
      for (int64_t i = 0; i < R; ++i)
        for (int64_t j = 0; j < kQ8Nr; ++j) {
          int32_t dot = 0;
          for (int64_t r = 0; r < 4; ++r)
            dot += static_cast<int32_t>(a[i][seg_off[s] + 4 * q + r]) *
                   static_cast<int32_t>(static_cast<int8_t>(bp[4 * j + r]));
          tile[i * ldt + j] = WrapAdd(tile[i * ldt + j], dot);
        }
      bp += 4 * kQ8Nr;
    }
}

// For each of count windows w (at src + w * step): dst[w * ld + c] = max over the kh x kw window
// of src[i * row + j * ld + c], c < n: the pooled accumulators of a row of windows (8 or 16
// channels at a time in registers where the CPU has AVX2; isa: QKernels(), or null).
void MaxOverWindows(const QIsaKernels* isa, const int32_t* src, int64_t ld, int64_t row, int64_t kh, int64_t kw,
                    int64_t n, int64_t count, int64_t step, int32_t* dst) {
  const int64_t c0 = isa ? isa->max_over_windows(src, ld, row, kh, kw, n, count, step, dst) : 0;
  for (int64_t w = 0; w < count; ++w)
    for (int64_t c = c0; c < n; ++c) {
      const int32_t* s = src + w * step;
      int32_t m = s[c];
      for (int64_t i = 0; i < kh; ++i)
        for (int64_t j = 0; j < kw; ++j) m = std::max(m, s[i * row + j * ld + c]);
      dst[w * ld + c] = m;
    }
}

// rows consecutive output positions (pos: their offsets in the padded image xp) x one column
// panel into out (row stride ldt), four positions per micro-tile, in one call (with short K,
// e.g. a 1-channel first layer, the per-call cost of single tiles was a third of the conv).
void ConvBand(int64_t rows, const uint8_t* xp, const int64_t* pos, const int64_t* seg_off, int64_t segments,
              int64_t seg_quads, const uint8_t* bp, int32_t* out, int64_t ldt) {
  static_assert(kQ8Mr == 4, "ConvBand handles up to 4 rows per tile");
  ForConvBandTiles(rows, xp, pos, [&](const uint8_t* const* a, int64_t n, int64_t r) {
    ConvTile(n, a, seg_off, segments, seg_quads, bp, out + r * ldt, ldt);
  });
}

// K x M (k-major) int8 weights for the B panels: k = segment * seg_bytes + byte, where byte
// `tj * C + c` of kernel row ti's segment (rows) or byte c of tap (ti, tj)'s (taps); zeros past
// each segment's C or kw * C bytes.
std::vector<int8_t> SegmentWeights(const int8_t* w, int64_t M, int64_t C, int64_t kh, int64_t kw, bool rows,
                                   int64_t seg_bytes) {
  const int64_t segments = rows ? kh : kh * kw;
  std::vector<int8_t> out(static_cast<size_t>(segments * seg_bytes * M), 0);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t ti = 0; ti < kh; ++ti)
        for (int64_t tj = 0; tj < kw; ++tj) {
          const int64_t k = rows ? ti * seg_bytes + tj * C + c : (ti * kw + tj) * seg_bytes + c;
          out[static_cast<size_t>(k * M + m)] = w[((m * C + c) * kh + ti) * kw + tj];
        }
  return out;
}

}  // namespace

bool QPackConvWeightsNhwc(const int8_t* w, int64_t M, int64_t C, const int64_t* kernel, int spatial,
                          const std::vector<int32_t>& w_zp, QConvNhwcWeights* out) {
  if (spatial < 1 || spatial > 2 || M < 1 || C < 1) return false;
  for (int32_t z : w_zp)
    if (z != 0) return false;
  const int64_t kh = spatial == 2 ? kernel[0] : 1, kw = kernel[spatial - 1];
  const std::vector<int32_t> zero{0};
  QConvNhwcWeights packed;
  packed.channels = C, packed.kh = kh, packed.kw = kw;
  const int64_t tap_bytes = RoundUp(C, 4);
  std::vector<int8_t> taps = SegmentWeights(w, M, C, kh, kw, false, tap_bytes);
  if (!Q8WeightsFit(taps.data(), M, kh * kw * tap_bytes, true, zero)) return false;
  Q8PackWeightsB(taps.data(), kh * kw * tap_bytes, M, &packed.taps);
  if (C % 4 != 0) {
    const int64_t row_bytes = RoundUp(kw * C, 4);
    std::vector<int8_t> rows = SegmentWeights(w, M, C, kh, kw, true, row_bytes);
    if (!Q8WeightsFit(rows.data(), M, kh * row_bytes, true, zero)) return false;
    Q8PackWeightsB(rows.data(), kh * row_bytes, M, &packed.rows);
  }
  *out = std::move(packed);
  return true;
}

void QConvNhwc(const ConvShape& s, const QConvNhwcWeights& w, const void* x, DType x_dtype, int32_t x_zp,
               const QOutput& out, void* y, int threads, const int64_t* pool) {
  const WindowGeometry& g = s.geo;
  const bool two = g.spatial == 2;
  const int last = g.spatial - 1;
  const int64_t C = s.in_channels, M = s.out_channels, kh = w.kh, kw = w.kw;
  WH_CHECK(s.group == 1 && C == w.channels && (g.spatial == 1 || g.spatial == 2));
  const int64_t IH = two ? g.in[0] : 1, IW = g.in[last];
  const int64_t OH = two ? g.out[0] : 1, OW = g.out[last];
  const int64_t sh = two ? g.stride[0] : 1, sw = g.stride[last];
  const int64_t dh = two ? g.dilation[0] : 1, dw = g.dilation[last];
  const int64_t ph = two ? g.pad_begin[0] : 0, pw = g.pad_begin[last];
  const int64_t Hp = IH + ph + (two ? g.pad_end[0] : 0), Wp = IW + pw + g.pad_end[last];
  const int64_t P = OH * OW, in_image = C * IH * IW;
  // Row segments when the taps of a kernel row are adjacent bytes (stride and dilation 1 along
  // W); with C % 4 == 0 they are the tap segments laid end to end, so the tap packing serves.
  const bool row_segments = sw == 1 && dw == 1;
  const QPacked8& b = row_segments && C % 4 != 0 ? w.rows : w.taps;
  const int64_t segments = row_segments ? kh : kh * kw;
  const int64_t seg_quads = b.Kq / 4 / segments;
  std::vector<int64_t> seg_off(static_cast<size_t>(segments));
  for (int64_t ti = 0; ti < kh; ++ti)
    for (int64_t tj = 0; tj < (row_segments ? 1 : kw); ++tj)
      seg_off[static_cast<size_t>(row_segments ? ti : ti * kw + tj)] = (ti * dh * Wp + tj * dw) * C;

  const bool s8 = x_dtype == DType::kInt8;
  const uint8_t flip = s8 ? 0x80 : 0;
  const uint8_t pad = static_cast<uint8_t>(static_cast<uint8_t>(x_zp) ^ flip);
  const int32_t zx = x_zp + (s8 ? 128 : 0);
  Epilogue e = MakeEpilogue(out, false, 0, P, M);
  FoldZeroPointIntoBias(e, zx, b.sums.data(), M);
  // Each output position's first byte in the padded image (no divisions in the tiles).
  std::vector<int64_t> pos_off(static_cast<size_t>(P));
  for (int64_t oh = 0; oh < OH; ++oh)
    for (int64_t ow = 0; ow < OW; ++ow) pos_off[static_cast<size_t>(oh * OW + ow)] = (oh * sh * Wp + ow * sw) * C;
  const size_t es = OutElemSize(out.dtype);
  // With the max pool: its window (= stride) and the pooled positions per image.
  const int64_t kph = pool && two ? pool[0] : 1, kpw = pool ? pool[last] : 1;
  const int64_t PH = OH / kph, PW = OW / kpw, YP = PH * PW;
  WH_CHECK(!pool || YP > 0);
  // A work item: a band of whole conv rows (the kph rows under one pooled row; unpooled, about
  // 64 positions) times all output channels (at most 16 panels per strip). The band's products
  // fill an L1/L2-resident strip, the pool takes the max over each window of accumulators (the
  // epilogue is monotone: multipliers >= 0, QConvNhwc's contract), and the epilogue then runs
  // once over the strip (or the pooled rows).
  const int64_t ncp = (M + kQ8Nr - 1) / kQ8Nr, chunk_panels = std::min<int64_t>(ncp, kTileChunkPanels);
  const int64_t nchunks = (ncp + chunk_panels - 1) / chunk_panels;
  const int64_t band_rows = pool ? kph : std::max<int64_t>(1, 64 / OW);
  const bool wide = Q8Avx512Vnni();
  const QIsaKernels* isa = QKernels();
  const int64_t bands = pool ? PH : (OH + band_rows - 1) / band_rows;
  auto Bands = [&](const uint8_t* xp, char* ytp, int threads_in) {
    ParallelFor(bands * nchunks, threads_in, [&](int64_t t) {
      const int64_t bi = t / nchunks, cp0 = t % nchunks * chunk_panels, cp1 = std::min(ncp, cp0 + chunk_panels);
      const int64_t ldt = (cp1 - cp0) * kQ8Nr, c0 = cp0 * kQ8Nr, nc = std::min(ldt, M - c0);
      const int64_t p0 = bi * band_rows * OW, band = std::min(band_rows * OW, P - p0);
      thread_local std::vector<int32_t> strip, pooled;
      strip.resize(static_cast<size_t>(band * ldt));
      if (wide) {  // 8 positions x two panels per tile (qgemm8_avx512vnni.cc)
        for (int64_t cp = cp0; cp < cp1; cp += 2)
          cpu::qgemm8_avx512vnni::ConvBand(band, xp, pos_off.data() + p0, seg_off.data(), segments, seg_quads,
                                      b.data.data() + cp * kQ8Nr * b.Kq, kQ8Nr * b.Kq,
                                      static_cast<int>(std::min<int64_t>(2, cp1 - cp)),
                                      strip.data() + (cp - cp0) * kQ8Nr, ldt);
      } else {
        for (int64_t cp = cp0; cp < cp1; ++cp)
          (isa ? isa->conv_band : ConvBand)(band, xp, pos_off.data() + p0, seg_off.data(), segments, seg_quads,
                   b.data.data() + cp * kQ8Nr * b.Kq, strip.data() + (cp - cp0) * kQ8Nr, ldt);
      }
      if (!pool) {
        EpilogueRows(e, strip.data(), ldt, band, nc, p0, c0, ytp + static_cast<size_t>(p0 * M + c0) * es, M);
        return;
      }
      pooled.resize(static_cast<size_t>(PW * ldt));
      MaxOverWindows(isa, strip.data(), ldt, OW * ldt, kph, kpw, nc, PW, kpw * ldt, pooled.data());
      EpilogueRows(e, pooled.data(), ldt, PW, nc, bi * PW, c0, ytp + static_cast<size_t>(bi * PW * M + c0) * es, M);
    });
  };
  // The segments' last groups of four may run up to 3 bytes past the padded image.
  const size_t padded_bytes = static_cast<size_t>(Hp * Wp * C) + 64;
  ForImageBlocks(s.batch, threads, [&](int64_t n0, int64_t n1, int gemm_threads) {
    thread_local std::vector<uint8_t> padded, planar;
    thread_local std::vector<char> yt;
    padded.resize(padded_bytes);
    yt.resize(static_cast<size_t>(YP * M) * es);
    // Plain pointers: the GEMM's threads must see this thread's buffers, not their own.
    uint8_t* xp = padded.data();
    char* ytp = yt.data();
    for (int64_t n = n0; n < n1; ++n) {
      const uint8_t* xi = static_cast<const uint8_t*>(x) + n * in_image;
      // The padded channels-last image.
      if (Hp * Wp != IH * IW) std::memset(xp, pad, static_cast<size_t>(Hp * Wp * C));
      std::memset(xp + Hp * Wp * C, pad, padded_bytes - static_cast<size_t>(Hp * Wp * C));
      if (C == 1) {
        for (int64_t ih = 0; ih < IH; ++ih) {
          uint8_t* row = xp + (ih + ph) * Wp + pw;
          for (int64_t iw = 0; iw < IW; ++iw) row[iw] = xi[ih * IW + iw] ^ flip;
        }
      } else if (Hp * Wp == IH * IW) {
        TransposeBytes(xi, IH * IW, C, IH * IW, xp, C, flip);
      } else {
        planar.resize(static_cast<size_t>(in_image));
        TransposeBytes(xi, IH * IW, C, IH * IW, planar.data(), C, flip);
        for (int64_t ih = 0; ih < IH; ++ih)
          std::memcpy(xp + ((ih + ph) * Wp + pw) * C, planar.data() + ih * IW * C, static_cast<size_t>(IW * C));
      }
      // [positions][channels] through the epilogue (pooled or not).
      Bands(xp, ytp, gemm_threads);
      // [positions][channels] -> [channels][positions].
      char* yi = static_cast<char*>(y) + static_cast<size_t>(n * M * YP) * es;
      if (es == 1) {
        TransposeBytes(reinterpret_cast<const uint8_t*>(ytp), M, YP, M, reinterpret_cast<uint8_t*>(yi), YP, 0);
      } else {
        cpu::TransposeLast2(reinterpret_cast<const float*>(ytp), 1, YP, M, reinterpret_cast<float*>(yi), 1);
      }
    }
  });
}

}  // namespace whittle
