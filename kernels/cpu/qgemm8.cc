// The u8 x s8 byte kernel (see kernels/cpu/qgemm.h) and the byte im2col it shares with the
// oneDNN conv path.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "kernels/cpu/isa/features.h"
#include "kernels/cpu/isa/qgemm_kernels.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/qgemm.h"
#include "kernels/cpu/qgemm_tile.h"

namespace whittle {
namespace {

// The drivers' shared internals (epilogue state, tiling, loads and stores).
using namespace qgemm_internal;  // NOLINT(build/namespaces)

// tile[R][kQ8Nr] = R rows of A (row stride lda bytes) * one B panel over kquads groups of 4 k.
// kAUnsigned: A holds the unsigned operand (GEMM: activations) and B the weights; else the
// reverse (conv). The scalar form; the vector ones are QKernels()->tile8.
template <bool kAUnsigned>
void MicroKernel8(int64_t R, const uint8_t* ap, int64_t lda, const uint8_t* bp, int64_t kquads, int32_t* tile,
                  int64_t ldt) {
  static_assert(kQ8Nr == 16, "micro-kernel shape");
  ZeroTileRows(R, kQ8Nr, tile, ldt);
  for (int64_t kq = 0; kq < kquads; ++kq) {
    for (int64_t i = 0; i < R; ++i)
      for (int64_t j = 0; j < kQ8Nr; ++j) {
        int32_t dot = 0;
        for (int64_t r = 0; r < 4; ++r) {
          const int32_t av = kAUnsigned ? static_cast<int32_t>(ap[i * lda + 4 * kq + r])
                                        : static_cast<int32_t>(static_cast<int8_t>(ap[i * lda + 4 * kq + r]));
          const int32_t bv = kAUnsigned ? static_cast<int32_t>(static_cast<int8_t>(bp[4 * j + r]))
                                        : static_cast<int32_t>(bp[4 * j + r]);
          dot += av * bv;
        }
        tile[i * ldt + j] = WrapAdd(tile[i * ldt + j], dot);
      }
    bp += 4 * kQ8Nr;
  }
}

}  // namespace

void QIm2ColBytes(const ConvShape& s, const uint8_t* x_image, uint8_t x_zp, uint8_t flip, uint8_t* dst, int64_t ld) {
  const WindowGeometry& g = s.geo;
  const int64_t ksize = g.KernelSize(), in_size = g.InSize();
  const int64_t K = s.in_channels / s.group * ksize;
  const int64_t kw = g.kernel[g.spatial - 1];
  const int64_t IH = g.spatial == 2 ? g.in[0] : 1, IW = g.in[g.spatial - 1];
  const int64_t OH = g.spatial == 2 ? g.out[0] : 1, OW = g.out[g.spatial - 1];
  const int64_t sh = g.spatial == 2 ? g.stride[0] : 1, sw = g.stride[g.spatial - 1];
  const int64_t dh = g.spatial == 2 ? g.dilation[0] : 1, dw = g.dilation[g.spatial - 1];
  const int64_t ph = g.spatial == 2 ? g.pad_begin[0] : 0, pw = g.pad_begin[g.spatial - 1];
  const uint8_t pad = static_cast<uint8_t>(x_zp ^ flip);
  for (int64_t k = 0; k < K; ++k) {
    const int64_t c = k / ksize, t = k % ksize, ti = t / kw, tj = t % kw;
    const uint8_t* plane = x_image + c * in_size;
    uint8_t* row = dst + k * ld;
    const int64_t off = tj * dw - pw;
    const int64_t lo = std::min(OW, off >= 0 ? 0 : (-off + sw - 1) / sw);
    const int64_t hi = std::max(lo, std::min(OW, IW - 1 - off < 0 ? 0 : (IW - 1 - off) / sw + 1));
    for (int64_t oh = 0; oh < OH; ++oh) {
      uint8_t* out = row + oh * OW;
      const int64_t ih = oh * sh - ph + ti * dh;
      if (ih < 0 || ih >= IH) {
        std::memset(out, pad, static_cast<size_t>(OW));
        continue;
      }
      const uint8_t* in = plane + ih * IW + off;
      std::memset(out, pad, static_cast<size_t>(lo));
      if (sw == 1) {
        for (int64_t ow = lo; ow < hi; ++ow) out[ow] = in[ow] ^ flip;
      } else {
        for (int64_t ow = lo; ow < hi; ++ow) out[ow] = in[ow * sw] ^ flip;
      }
      std::memset(out + hi, pad, static_cast<size_t>(OW - hi));
    }
  }
}

int64_t QIm2ColBytesPadded(const ConvShape& s, const uint8_t* x_image, uint8_t x_zp, uint8_t flip,
                           std::vector<uint8_t>* planes, uint8_t* dst, int64_t ld) {
  const WindowGeometry& g = s.geo;
  const int64_t C = s.in_channels / s.group, IH = g.in[0], IW = g.in[1];
  const int64_t Hp = IH + g.pad_begin[0] + g.pad_end[0], Wp = IW + g.pad_begin[1] + g.pad_end[1];
  const int64_t kh = g.kernel[0], kw = g.kernel[1], dh = g.dilation[0], dw = g.dilation[1];
  const int64_t plane = Hp * Wp, cols = g.out[0] * Wp;
  const uint8_t pad = static_cast<uint8_t>(x_zp ^ flip);
  // Slack past the last plane: the last taps' rows run (kw - 1) * dw bytes beyond it (garbage
  // columns, dropped by the epilogue).
  planes->resize(static_cast<size_t>(C * plane + (kw - 1) * dw + 64));
  uint8_t* pp = planes->data();
  std::memset(pp, pad, planes->size());
  for (int64_t c = 0; c < C; ++c)
    for (int64_t ih = 0; ih < IH; ++ih) {
      const uint8_t* in = x_image + (c * IH + ih) * IW;
      uint8_t* out = pp + c * plane + (ih + g.pad_begin[0]) * Wp + g.pad_begin[1];
      for (int64_t iw = 0; iw < IW; ++iw) out[iw] = in[iw] ^ flip;
    }
  for (int64_t c = 0; c < C; ++c)
    for (int64_t ti = 0; ti < kh; ++ti)
      for (int64_t tj = 0; tj < kw; ++tj)
        std::memcpy(dst + ((c * kh + ti) * kw + tj) * ld, pp + c * plane + ti * dh * Wp + tj * dw,
                    static_cast<size_t>(cols));
  return Wp;
}

bool Q8WeightsFit(const int8_t* w, int64_t M, int64_t K, bool k_major, const std::vector<int32_t>& w_zp) {
  for (int32_t z : w_zp)
    if (z != 0) return false;
  const qgemm_internal::QIsaKernels* isa = qgemm_internal::QKernels();
  if (isa && isa->exact_bytes) return true;  // vpdpbusd has no int16 step
  // Pairs (k, k + 1) with k even; k_major: w is K x M (element (k, m) at k * M + m).
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k + 1 < K; k += 2) {
      const int a = k_major ? w[k * M + m] : w[m * K + k];
      const int b = k_major ? w[(k + 1) * M + m] : w[m * K + k + 1];
      if (std::abs(a) + std::abs(b) > 128) return false;
    }
  return true;
}

void Q8PackWeightsA(const int8_t* w, int64_t M, int64_t K, QPacked8* out) {
  out->rows = M;
  out->K = K;
  out->Kq = RoundUp(std::max<int64_t>(K, 1), 4);
  out->data.assign(static_cast<size_t>(RoundUp(M, kQ8Mr) * out->Kq), 0);
  out->sums.assign(static_cast<size_t>(M), 0);
  for (int64_t m = 0; m < M; ++m) {
    int32_t sum = 0;
    for (int64_t k = 0; k < K; ++k) {
      out->data[static_cast<size_t>(m * out->Kq + k)] = static_cast<uint8_t>(w[m * K + k]);
      sum += w[m * K + k];
    }
    out->sums[static_cast<size_t>(m)] = sum;
  }
}

void Q8PackWeightsB(const int8_t* w, int64_t K, int64_t N, QPacked8* out) {
  out->rows = N;
  out->K = K;
  out->Kq = RoundUp(std::max<int64_t>(K, 1), 4);
  const int64_t panels = (N + kQ8Nr - 1) / kQ8Nr;
  out->data.assign(static_cast<size_t>(panels * out->Kq * kQ8Nr), 0);
  out->sums.assign(static_cast<size_t>(N), 0);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n) {
      const int8_t v = w[k * N + n];
      const int64_t p = n / kQ8Nr, j = n % kQ8Nr;
      out->data[static_cast<size_t>(((p * (out->Kq / 4) + k / 4) * kQ8Nr + j) * 4 + k % 4)] = static_cast<uint8_t>(v);
      out->sums[static_cast<size_t>(n)] += v;
    }
}

void Q8PackActivationsA(const void* x, int64_t M, int64_t K, int64_t ld, uint8_t flip, QPacked8* out, int threads) {
  out->rows = M;
  out->K = K;
  out->Kq = RoundUp(std::max<int64_t>(K, 1), 4);
  const int64_t Kq = out->Kq;
  out->data.resize(static_cast<size_t>(RoundUp(M, kQ8Mr) * Kq));
  const uint8_t* src = static_cast<const uint8_t*>(x);
  uint8_t* dst = out->data.data();
  ParallelFor(RoundUp(M, kQ8Mr), M * K >= (1 << 16) ? threads : 1, [&](int64_t m) {
    uint8_t* d = dst + m * Kq;
    if (m >= M) {
      std::memset(d, 0, static_cast<size_t>(Kq));
      return;
    }
    const uint8_t* r = src + m * ld;
    if (flip == 0) {
      std::memcpy(d, r, static_cast<size_t>(K));
    } else {
      for (int64_t k = 0; k < K; ++k) d[k] = r[k] ^ flip;
    }
    std::memset(d + K, 0, static_cast<size_t>(Kq - K));
  });
}

void Q8PackRowsB(const uint8_t* rows, int64_t K, int64_t N, int64_t ld, QPacked8* out) {
  out->rows = N;
  out->K = K;
  out->Kq = RoundUp(std::max<int64_t>(K, 1), 4);
  const int64_t Kq = out->Kq, panels = (N + kQ8Nr - 1) / kQ8Nr, full = N / kQ8Nr;
  out->data.resize(static_cast<size_t>(panels * Kq * kQ8Nr));
  uint8_t* dst = out->data.data();
  const qgemm_internal::QIsaKernels* isa = qgemm_internal::QKernels();
  for (int64_t kq = 0; kq < Kq / 4; ++kq) {
    const uint8_t* r[4];
    static const uint8_t kZeros[kQ8Nr] = {};
    for (int64_t i = 0; i < 4; ++i) r[i] = 4 * kq + i < K ? rows + (4 * kq + i) * ld : nullptr;
    int64_t p = 0;
    if (isa) {  // 4 x 16 bytes -> 16 x 4 per full panel in registers
      isa->pack_quad_panels(r, full, Kq * kQ8Nr, dst + kq * kQ8Nr * 4);
      p = full;
    }
    for (; p < panels; ++p) {
      uint8_t* d = dst + (p * (Kq / 4) + kq) * kQ8Nr * 4;
      if (p < full) {
        const uint8_t* q0 = r[0] ? r[0] + p * kQ8Nr : kZeros;
        const uint8_t* q1 = r[1] ? r[1] + p * kQ8Nr : kZeros;
        const uint8_t* q2 = r[2] ? r[2] + p * kQ8Nr : kZeros;
        const uint8_t* q3 = r[3] ? r[3] + p * kQ8Nr : kZeros;
        for (int64_t j = 0; j < kQ8Nr; ++j) {
          d[4 * j] = q0[j];
          d[4 * j + 1] = q1[j];
          d[4 * j + 2] = q2[j];
          d[4 * j + 3] = q3[j];
        }
        continue;
      }
      for (int64_t j = 0; j < kQ8Nr; ++j) {
        const int64_t n = p * kQ8Nr + j;
        for (int64_t i = 0; i < 4; ++i) d[4 * j + i] = n < N && r[i] ? r[i][n] : 0;
      }
    }
  }
}

namespace qgemm_internal {
namespace {
std::atomic<int> g_vnni512_override{-1};
}  // namespace

bool Q8Avx512Vnni() {
  static const bool supported = cpu::CpuFeatures().Avx512() && cpu::CpuFeatures().avx512vnni;
  const int o = g_vnni512_override.load(std::memory_order_relaxed);
  return supported && o != 0;
}

void SetQ8Avx512Vnni(int use) { g_vnni512_override.store(use, std::memory_order_relaxed); }
}  // namespace qgemm_internal

void QGemmPacked8(const QPacked8& a, const QPacked8& b, bool a_is_weights, int32_t zx, const QOutput& out,
                  bool channel_is_row, int64_t channel_offset, void* y, int64_t ldy, int threads) {
  WH_CHECK(a.Kq == b.Kq);
  const int64_t M = a.rows, N = b.rows, Kq = a.Kq;
  Epilogue e = MakeEpilogue(out, channel_is_row, channel_offset, M, N);
  const std::vector<int32_t>& sums = a_is_weights ? a.sums : b.sums;
  FoldZeroPointIntoBias(e, zx, sums.data(), static_cast<int64_t>(sums.size()));
  if (Q8Avx512Vnni() && !a_is_weights) {
    // 8 x 32 tiles of two 16-column panels (the last may have one). GEMMs only: the convs' (A =
    // weights, B = im2col positions) ran 8 % slower on the bundled int8 CNN at batch 64 with it.
    namespace v = cpu::qgemm8_avx512vnni;
    const int64_t panel_stride = kQ8Nr * Kq;
    qgemm_internal::TiledGemm<v::kMr, v::kNr>(
        M, N, Kq, e, y, ldy, threads, [&](int64_t rows, int64_t rp, int64_t cp, int32_t* tile, int64_t ldt) {
          const int np = N - cp * v::kNr > kQ8Nr ? 2 : 1;
          v::Tile(static_cast<int>(rows), np, !a_is_weights, a.data.data() + rp * v::kMr * Kq, Kq,
                  b.data.data() + 2 * cp * panel_stride, panel_stride, Kq / 4, tile, ldt);
        });
    return;
  }
  const qgemm_internal::QIsaKernels* isa = qgemm_internal::QKernels();
  qgemm_internal::TiledGemm<kQ8Mr, kQ8Nr>(
      M, N, Kq, e, y, ldy, threads, [&](int64_t rows, int64_t rp, int64_t cp, int32_t* tile, int64_t ldt) {
        const uint8_t* ap = a.data.data() + rp * kQ8Mr * Kq;
        const uint8_t* bp = b.data.data() + cp * kQ8Nr * Kq;
        if (isa) isa->tile8(rows, !a_is_weights, ap, Kq, bp, Kq / 4, tile, ldt);
        else if (a_is_weights) MicroKernel8<false>(rows, ap, Kq, bp, Kq / 4, tile, ldt);
        else MicroKernel8<true>(rows, ap, Kq, bp, Kq / 4, tile, ldt);
      });
}

}  // namespace whittle
