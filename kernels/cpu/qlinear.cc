#include "kernels/cpu/qlinear.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <vector>

#include "kernels/cpu/depthwise_window.h"
#include "lib/ir/memory_meter.h"
#include "kernels/cpu/isa/features.h"
#include "kernels/cpu/isa/qgemm_kernels.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/qgemm.h"
#include "kernels/cpu/qgemm_tile.h"

namespace whittle::cpu {
namespace depthwise {
namespace {
std::atomic<int> g_window_override{-1};
}  // namespace

void SetWindowKernel(int use) { g_window_override.store(use, std::memory_order_relaxed); }
}  // namespace depthwise

namespace {

// One packed copy of a GEMM's constant weights: for the byte kernel where it is exact, else for
// the int16 kernel (which then packs per call in the rare case it runs anyway: WHITTLE_QGEMM=own16).
struct CpuGemmWeights {
  std::shared_ptr<QPackedB> b;
  std::shared_ptr<QPacked8> b8;
};
// A depthwise conv's int8 weights [C, 1, kh, kw] as DepthwiseBytes reads them: each channel's
// weight sum (the input zero point's fold into the bias), and each kernel row as groups of taps
// in an int32 for the window kernels, 4 int8 (AVX-512: quads) or 2 int16 (AVX2: pairs), 0 past
// the row.
struct DepthwiseWeights {
  std::vector<int32_t> sums, quads, pairs;
};

DepthwiseWeights PackDepthwiseWeights(const int8_t* w, int64_t C, int64_t kh, int64_t kw) {
  DepthwiseWeights d;
  d.sums.assign(static_cast<size_t>(C), 0);
  const int64_t nq = (kw + 3) / 4, np = (kw + 1) / 2;
  std::vector<uint32_t> quads(static_cast<size_t>(C * kh * nq), 0), pairs(static_cast<size_t>(C * kh * np), 0);
  for (int64_t ch = 0; ch < C; ++ch)
    for (int64_t i = 0; i < kh; ++i)
      for (int64_t j = 0; j < kw; ++j) {
        const int8_t wj = w[(ch * kh + i) * kw + j];
        d.sums[static_cast<size_t>(ch)] += wj;
        quads[static_cast<size_t>((ch * kh + i) * nq + j / 4)] |= uint32_t{static_cast<uint8_t>(wj)} << (8 * (j % 4));
        pairs[static_cast<size_t>((ch * kh + i) * np + j / 2)] |= uint32_t{static_cast<uint16_t>(wj)} << (16 * (j % 2));
      }
  d.quads.assign(quads.begin(), quads.end());
  d.pairs.assign(pairs.begin(), pairs.end());
  return d;
}

// The same for a convolution: group-1 1-D/2-D int8 weights for the channels-last byte kernel
// (QConvNhwc), else one packed A per group for the planar byte kernel or the int16 kernel; a
// depthwise conv's also for DepthwiseBytes.
struct CpuConvWeights {
  std::shared_ptr<const std::vector<QPackedA>> w;
  std::shared_ptr<const std::vector<QPacked8>> w8;
  std::shared_ptr<const DepthwiseWeights> depthwise;
  std::shared_ptr<const QConvNhwcWeights> nhwc;
};

// W [M, C/group, k...] as one A matrix per group: rows = the group's output channels.
std::shared_ptr<const std::vector<QPackedA>> PackInt16ConvWeights(const Tensor& w, const std::vector<int32_t>& w_zp,
                                                                  int64_t group) {
  auto out = std::make_shared<std::vector<QPackedA>>(static_cast<size_t>(group));
  const int64_t M = w.dim(0), mg = M / group, kg = w.numel() / M;
  for (int64_t g = 0; g < group; ++g) {
    std::vector<int32_t> zp;
    if (w_zp.size() == 1) zp = w_zp;
    else zp.assign(w_zp.begin() + g * mg, w_zp.begin() + (g + 1) * mg);
    const QMatrix a{static_cast<const char*>(w.raw_data()) + g * mg * kg, w.dtype(), kg, &zp};
    QPackA(a, mg, kg, &(*out)[static_cast<size_t>(g)]);
  }
  return out;
}

constexpr int64_t kMaxDepthwiseTaps = 64;  // DepthwiseBytes' kernels: up to 8 x 8

// Whether c is a depthwise 2-D convolution (group = C = M: MobileNet's 3x3 and 5x5) with
// symmetric int8 weights, which DepthwiseBytes computes.
bool DepthwiseEligible(const QConvCall& c) {
  const ConvShape& s = *c.shape;
  if (s.geo.spatial != 2 || s.group < 2 || s.group != s.in_channels || s.group != s.out_channels) return false;
  if (c.w->dtype() != DType::kInt8 || c.w->rank() != 4 || c.w->dim(1) != 1) return false;
  if (c.w->dim(2) * c.w->dim(3) > kMaxDepthwiseTaps) return false;
  for (int32_t z : *c.w_zp)
    if (z != 0) return false;
  return c.x->dtype() == DType::kUInt8 || c.x->dtype() == DType::kInt8;
}

constexpr int64_t kTapBlock = 32;  // outputs per register block of DepthwiseTaps

// Which depthwise window kernel (kernels/cpu/depthwise_window.h) runs here: 512 (AVX-512 VBMI +
// VNNI), 2 (AVX2) or 0 (none: the tap-by-tap path).
int DepthwiseWindowKernel() {
  const IsaFeatures& f = CpuFeatures();
  const bool avx512 = f.Avx512() && f.avx512vbmi && f.avx512vnni, avx2 = f.Avx2();
  const int o = depthwise::g_window_override.load(std::memory_order_relaxed);
  if (o == 0) return 0;
  if (avx512 && o != 2) return 512;
  return avx2 ? 2 : 0;
}

// acc[p] = sum over the taps t < taps of src[t][p] * w[t] for p < n rounded up to kTapBlock
// (src[t] readable and acc writable that far). Per block of 32 outputs the sums stay in
// registers across the taps: bytes zero-extended to int32 lanes (x in the low int16, 0 in the
// high one) and vpmaddwd with (w, 0) pairs gives x * w exactly in one multiply. Through a
// tap-by-tap pass over the whole run (the first form), every tap loaded and stored the sums again.
void DepthwiseTaps(int32_t* __restrict acc, const uint8_t* const* src, const int32_t* w, int taps, int64_t n) {
  if (const qgemm_internal::QIsaKernels* isa = qgemm_internal::QKernels())
    return isa->depthwise_taps(acc, src, w, taps, n);
  for (int64_t p = 0; p < n; ++p) {
    int32_t a = 0;
    for (int t = 0; t < taps; ++t) a += static_cast<int32_t>(src[t][p]) * w[t];
    acc[p] = a;
  }
}

// dst[i] = src[i * stride] ^ flip for i < n. Stride 2 with the constant spelled out, so that GCC
// vectorizes the gather (strided convs had spent more time building their planes than summing).
void FlipRow(uint8_t* __restrict dst, const uint8_t* __restrict src, int64_t stride, uint8_t flip, int64_t n) {
  if (stride == 1) {
    for (int64_t i = 0; i < n; ++i) dst[i] = src[i] ^ flip;
  } else if (stride == 2) {
    for (int64_t i = 0; i < n; ++i) dst[i] = src[2 * i] ^ flip;
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = src[i * stride] ^ flip;
  }
}

// Depthwise int8 convolution, per image and channel: the zero-point-padded plane (int8 inputs
// shifted to unsigned), then int32 sums of x * w (taps in the padding read the zero point, which
// the -zx * sum(w) fold into the bias cancels), and the shared epilogue. The sums come from the
// window kernels (kernels/cpu/depthwise_window.h: a kernel row's taps gathered per output, the
// epilogue inside for quantized outputs) where the CPU and the row's stride and dilation allow,
// else tap by tap, vectorized along the row. Through the byte kernel each channel had been a GEMM of
// one row: the depthwise convs were three quarters of an int8 MobileNetV2.
Status DepthwiseBytes(const QConvCall& c, const ConvShape& s, const Tensor& x, Tensor& y, int threads) {
  const WindowGeometry& g = s.geo;
  const int64_t C = s.in_channels, IH = g.in[0], IW = g.in[1], OH = g.out[0], OW = g.out[1], P = OH * OW;
  const int64_t kh = g.kernel[0], kw = g.kernel[1], sh = g.stride[0], sw = g.stride[1];
  const int64_t dh = g.dilation[0], dw = g.dilation[1], ph = g.pad_begin[0], pw = g.pad_begin[1];
  const int64_t Hp = IH + ph + g.pad_end[0], Wp = IW + pw + g.pad_end[1];
  const bool s8 = x.dtype() == DType::kInt8;
  const uint8_t flip = s8 ? 0x80 : 0;
  const int32_t zx = c.x_zp + (s8 ? 128 : 0);  // the unsigned bytes' zero point, 0..255
  const int8_t* w = static_cast<const int8_t*>(c.w->raw_data());
  // Packed at load where the weights are constant, else here.
  const CpuConvWeights* packed = static_cast<const CpuConvWeights*>(c.packed_w);
  DepthwiseWeights per_call;
  if (!packed || !packed->depthwise) per_call = PackDepthwiseWeights(w, C, kh, kw);
  const DepthwiseWeights& dwts = packed && packed->depthwise ? *packed->depthwise : per_call;
  qgemm_internal::Epilogue e = qgemm_internal::MakeEpilogue(*c.out, true, 0, C, P);
  qgemm_internal::FoldZeroPointIntoBias(e, zx, dwts.sums.data(), C);
  const size_t es = qgemm_internal::OutElemSize(y.dtype());
  const uint8_t* xs = static_cast<const uint8_t*>(x.raw_data());
  char* ys = static_cast<char*>(y.raw_data());
  const int taps = static_cast<int>(kh * kw);
  // Channels in blocks of about 64K multiply-adds: the late layers' planes are 5 x 5, where the
  // per-task setup had outweighed the sums.
  const int64_t planes_total = s.batch * C;
  const int64_t per_block = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, P * taps));
  const int64_t blocks = (planes_total + per_block - 1) / per_block;
  const int block_threads = planes_total * P * taps >= (1 << 16) ? threads : 1;
  const int window = DepthwiseWindowKernel();
  if ((window == 512 && depthwise::WindowFits(sw, dw)) || (window == 2 && depthwise::WindowFits2(sw, kw, dw))) {
    // The window kernel reads each kernel row's taps from the padded rows themselves, so only the
    // rows are split by phase: plane a holds padded rows a, a + sh, ..., each Wr = Wp wide. Output
    // row oh then reads kernel row i at plane((i * dh) % sh) + (oh + i * dh / sh) * Wr.
    const int64_t Wr = Wp, Hq = (Hp + sh - 1) / sh;
    // Each channel's kernel rows as groups of taps: quads (AVX-512) or pairs (AVX2).
    const int groups = static_cast<int>(window == 512 ? (kw + 3) / 4 : (kw + 1) / 2);
    const std::vector<int32_t>& wq = window == 512 ? dwts.quads : dwts.pairs;
    std::vector<int64_t> row_at(static_cast<size_t>(kh)), in_row_at(static_cast<size_t>(IH));
    for (int64_t i = 0; i < kh; ++i) row_at[static_cast<size_t>(i)] = ((i * dh) % sh * Hq + (i * dh) / sh) * Wr;
    for (int64_t ih = 0; ih < IH; ++ih) {
      const int64_t r = ih + ph;
      in_row_at[static_cast<size_t>(ih)] = (r % sh * Hq + r / sh) * Wr + pw;
    }
    const depthwise::WindowTable table = depthwise::MakeWindowTable(sw, dw, window == 2 ? groups : 0);
    const bool fused = e.kind == QOutput::Kind::kQuantized;
    const int64_t slack = 64 + 16 * sw + 4 * groups * dw;  // past the last plane: Windows' last loads
    ParallelFor(blocks, block_threads, [&](int64_t blk) {
      thread_local std::vector<uint8_t> planes;
      thread_local std::vector<int32_t> acc;
      planes.assign(static_cast<size_t>(sh * Hq * Wr + slack), static_cast<uint8_t>(zx));  // padding: the zero point
      acc.resize(static_cast<size_t>(P));
      uint8_t* q0 = planes.data();
      const uint8_t* rows[kMaxDepthwiseTaps];
      for (int64_t i = 0; i < kh; ++i) rows[i] = q0 + row_at[static_cast<size_t>(i)];
      for (int64_t t = blk * per_block; t < std::min(planes_total, (blk + 1) * per_block); ++t) {
        const int64_t ch = t % C;
        const uint8_t* xi = xs + t * IH * IW;
        const int32_t* wc = wq.data() + ch * kh * groups;
        char* yc = ys + static_cast<size_t>(t * P) * es;
        // Quantized outputs take the epilogue inside the kernel; the others a pass over acc.
        depthwise::FusedRequant rq;
        if (fused) {
          rq.bias = e.bias[static_cast<size_t>(ch)], rq.mult = e.mult[static_cast<size_t>(ch)];
          rq.lo = e.lo, rq.hi = e.hi, rq.zp = e.zp, rq.u8 = e.u8, rq.y = yc;
        }
        if (window == 512) {
          depthwise_avx512vbmi::CopyRows(q0, in_row_at.data(), xi, IH, IW, flip);
          depthwise_avx512vbmi::Windows(table, acc.data(), rows, static_cast<int>(kh), wc, groups, sw, dw, OH, OW, Wr,
                                            fused ? &rq : nullptr);
        } else {
          for (int64_t ih = 0; ih < IH; ++ih) FlipRow(q0 + in_row_at[static_cast<size_t>(ih)], xi + ih * IW, 1, flip, IW);
          depthwise_avx2::Windows(table, acc.data(), rows, static_cast<int>(kh), wc, groups, sw, OH, OW, Wr,
                                             fused ? &rq : nullptr);
        }
        if (!fused) qgemm_internal::EpilogueRows(e, acc.data(), P, 1, P, ch, 0, yc, P);
      }
    });
    return Status::Ok();
  }
  // The padded plane is kept as sh x sw phase planes (phase (a, b) holds padded rows a, a + sh, ...
  // and columns b, b + sw, ...), and the sums are taken at the phase planes' pitch Wq: every tap of
  // a strided conv is then one contiguous run over the whole output, (OH - 1) * Wq + OW long,
  // which vectorizes (row by row, the 5- to 40-wide rows of MobileNet were mostly loop tails).
  const int64_t Hq = (Hp + sh - 1) / sh, Wq = (Wp + sw - 1) / sw, run = (OH - 1) * Wq + OW;
  const int64_t run_blocks = (run + kTapBlock - 1) / kTapBlock * kTapBlock;
  // Taps as offsets into the phase planes (the same for every channel).
  std::vector<int64_t> tap_at(static_cast<size_t>(taps));
  for (int64_t i = 0; i < kh; ++i)
    for (int64_t j = 0; j < kw; ++j) {
      const int64_t row = i * dh, col = j * dw;
      tap_at[static_cast<size_t>(i * kw + j)] = (((row % sh) * sw + col % sw) * Hq + row / sh) * Wq + col / sw;
    }
  ParallelFor(blocks, block_threads, [&](int64_t blk) {
    thread_local std::vector<uint8_t> planes;
    thread_local std::vector<int32_t> acc;
    // The padding keeps the zero point (rows below only write inside the image). Slack past the
    // last phase plane: the last block of the last tap reads up to kTapBlock - 1 bytes beyond
    // the run (sums past the run are never stored).
    planes.assign(static_cast<size_t>(sh * sw * Hq * Wq + kTapBlock), static_cast<uint8_t>(zx));
    acc.resize(static_cast<size_t>(std::max(OH * Wq, run_blocks)));
    uint8_t* q0 = planes.data();
    const uint8_t* src[kMaxDepthwiseTaps];
    int32_t wt[kMaxDepthwiseTaps];
    for (int k = 0; k < taps; ++k) src[k] = q0 + tap_at[static_cast<size_t>(k)];
    for (int64_t t = blk * per_block; t < std::min(planes_total, (blk + 1) * per_block); ++t) {
      const int64_t ch = t % C;
      const uint8_t* xi = xs + t * IH * IW;
      for (int64_t ih = 0; ih < IH; ++ih) {
        const int64_t r = ih + ph;
        for (int64_t b = 0; b < sw; ++b) {
          // Padded column c * sw + b holds input column c * sw + b - pw, where that is inside.
          const int64_t c0 = b >= pw ? 0 : (pw - b + sw - 1) / sw;
          const int64_t c1 = std::min(Wq, (IW + pw - b + sw - 1) / sw);
          if (c1 > c0)
            FlipRow(q0 + (((r % sh) * sw + b) * Hq + r / sh) * Wq + c0, xi + ih * IW + c0 * sw + b - pw, sw, flip,
                    c1 - c0);
        }
      }
      for (int k = 0; k < taps; ++k) wt[k] = w[ch * taps + k];
      DepthwiseTaps(acc.data(), src, wt, taps, run);
      for (int64_t oh = 1; oh < OH; ++oh)  // to [OH][OW]
        std::memmove(acc.data() + oh * OW, acc.data() + oh * Wq, static_cast<size_t>(OW) * sizeof(int32_t));
      qgemm_internal::EpilogueRows(e, acc.data(), P, 1, P, ch, 0, ys + static_cast<size_t>(t * P) * es, P);
    }
  });
  return Status::Ok();
}

// The byte kernel (see kernels/cpu/qgemm.h): per image and group, the im2col as bytes (int8
// inputs shifted to unsigned), packed into panels, times the packed weights. Stride-1 2-D convs
// take the padded-plane im2col (no per-row copies) and are compacted from the padded pitch.
Status ConvBytes(const QConvCall& c, const CpuConvWeights& packed, const ConvShape& s, const Tensor& x, Tensor& y,
                 int threads) {
  const WindowGeometry& g = s.geo;
  const int64_t mg = s.out_channels / s.group, cg = s.in_channels / s.group;
  const int64_t K = cg * g.KernelSize(), out_size = g.OutSize(), in_size = g.InSize();
  const int64_t OH = g.spatial == 2 ? g.out[0] : 1, OW = g.out[g.spatial - 1];
  const bool padded = g.spatial == 2 && g.stride[0] == 1 && g.stride[1] == 1;
  const int64_t pitch = padded ? g.in[1] + g.pad_begin[1] + g.pad_end[1] : OW;
  const int64_t cols = OH * pitch;
  const bool s8 = x.dtype() == DType::kInt8;
  const uint8_t flip = s8 ? 0x80 : 0;
  const uint8_t zp_byte = static_cast<uint8_t>(c.x_zp);
  const int32_t zx = c.x_zp + (s8 ? 128 : 0);
  const size_t y_es = qgemm_internal::OutElemSize(y.dtype());
  qgemm_internal::ForImageBlocks(s.batch, threads, [&](int64_t n0, int64_t n1, int gemm_threads) {
    thread_local std::vector<uint8_t> rows, planes;
    thread_local std::vector<char> tmp;
    QPacked8 panel;
    rows.resize(static_cast<size_t>(K * cols));
    if (padded) tmp.resize(static_cast<size_t>(mg * cols) * y_es);
    for (int64_t n = n0; n < n1; ++n) {
      for (int64_t gi = 0; gi < s.group; ++gi) {
        const uint8_t* xg = static_cast<const uint8_t*>(x.raw_data()) + (n * s.in_channels + gi * cg) * in_size;
        char* yp = static_cast<char*>(y.raw_data()) +
                   static_cast<size_t>((n * s.out_channels + gi * mg) * out_size) * y_es;
        if (padded) QIm2ColBytesPadded(s, xg, zp_byte, flip, &planes, rows.data(), cols);
        else QIm2ColBytes(s, xg, zp_byte, flip, rows.data(), cols);
        Q8PackRowsB(rows.data(), K, cols, cols, &panel);
        const QPacked8& w8 = (*packed.w8)[static_cast<size_t>(gi)];
        if (padded) {
          QGemmPacked8(w8, panel, true, zx, *c.out, true, gi * mg, tmp.data(), cols, gemm_threads);
          QCompactConvRows(tmp.data(), mg, OH, OW, pitch, y_es, yp);
        } else {
          QGemmPacked8(w8, panel, true, zx, *c.out, true, gi * mg, yp, out_size, gemm_threads);
        }
      }
    }
  });
  return Status::Ok();
}

// Group-1 convolution as one oneDNN GEMM per chunk of images: acc[m, n*P + p] = W * im2col, with
// the uint8 im2col shifted to int8 (x ^ 0x80 = x - 128, zero point x_zp - 128) so that the
// weights can be the GEMM's A (oneDNN's u8 x s8 wants the unsigned operand first). Each image's
// accumulators go through the same epilogue as our kernel. Chunks are sized so that the byte
// im2col and the int32 accumulators stay in L2, and run in parallel (a single-threaded GEMM
// each) when there are enough images; buffers are per thread and reused across calls. False
// when oneDNN refuses the operands (the caller falls back to our kernel).
bool ConvOneDnn(const QConvCall& c, const ConvShape& s, const Tensor& x, const Tensor& w, Tensor& y, int num_threads) {
  const WindowGeometry& g = s.geo;
  const int64_t Cout = s.out_channels, K = w.numel() / Cout;
  const int64_t OH = g.spatial == 2 ? g.out[0] : 1, OW = g.out[g.spatial - 1];
  const bool padded = g.spatial == 2 && g.stride[0] == 1 && g.stride[1] == 1;
  const int64_t pitch = padded ? g.in[1] + g.pad_begin[1] + g.pad_end[1] : OW;
  const int64_t cols = OH * pitch;  // GEMM columns per image
  const int64_t in_image = s.in_channels * g.InSize();
  const size_t y_es = qgemm_internal::OutElemSize(y.dtype());
  const int threads = std::max(1, num_threads);
  const int64_t per_image_bytes = cols * (K + 4 * Cout);
  int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(s.batch, (int64_t{384} << 10) / per_image_bytes));
  // Enough chunks for every thread (when there are enough images).
  chunk = std::min(chunk, std::max<int64_t>(1, s.batch / threads));
  const int64_t chunks = (s.batch + chunk - 1) / chunk;
  const bool parallel_chunks = chunks >= threads;
  // One GEMM for everything: threads inside it only when it is big enough to pay for them
  // (below ~2M multiply-adds, e.g. conv2 at batch 1, 2 threads were slower than 1).
  const int gemm_threads = parallel_chunks || Cout * s.batch * cols * K < (int64_t{1} << 21) ? 1 : threads;
  const std::vector<int32_t> col_zp{c.x_zp - 128};
  const uint8_t x_zp = static_cast<uint8_t>(c.x_zp);
  std::atomic<bool> ok{true};
  ParallelFor(chunks, parallel_chunks ? threads : 1, [&](int64_t ci) {
    thread_local std::vector<uint8_t> col, planes;
    thread_local std::vector<int32_t> acc;
    const int64_t n0 = ci * chunk, nb = std::min(chunk, s.batch - n0), ld = nb * cols;
    col.resize(static_cast<size_t>(K * ld));
    acc.resize(static_cast<size_t>(Cout * ld));
    for (int64_t i = 0; i < nb; ++i) {
      const uint8_t* xi = static_cast<const uint8_t*>(x.raw_data()) + (n0 + i) * in_image;
      if (padded) QIm2ColBytesPadded(s, xi, x_zp, 0x80, &planes, col.data() + i * cols, ld);
      else QIm2ColBytes(s, xi, x_zp, 0x80, col.data() + i * cols, ld);
    }
    const QMatrix am{w.raw_data(), w.dtype(), K, c.w_zp};
    const QMatrix bm{col.data(), DType::kInt8, ld, &col_zp};
    if (!QGemmAccOneDnn(am, bm, Cout, ld, K, acc.data(), gemm_threads)) {
      ok = false;  // the kernel falls back as a whole
      return;
    }
    QConvEpilogueCpu(*c.out, acc.data(), Cout, ld, nb, cols, OH, OW, pitch,
                     static_cast<char*>(y.raw_data()) + static_cast<size_t>(n0 * Cout * OH * OW) * y_es,
                     gemm_threads);
  });
  return ok.load();
}

}  // namespace

QPackedWeights PackGemmWeights(const Tensor& w, const std::vector<int32_t>& w_zp) {
  auto packed = std::make_shared<CpuGemmWeights>();
  if (w.dtype() == DType::kInt8 &&
      Q8WeightsFit(static_cast<const int8_t*>(w.raw_data()), w.dim(1), w.dim(0), true, w_zp)) {
    packed->b8 = std::make_shared<QPacked8>();
    Q8PackWeightsB(static_cast<const int8_t*>(w.raw_data()), w.dim(0), w.dim(1), packed->b8.get());
  } else {
    packed->b = std::make_shared<QPackedB>();
    QMatrix b{w.raw_data(), w.dtype(), w.dim(1), &w_zp};
    QPackB(b, w.dim(0), w.dim(1), packed->b.get());
  }
  return packed;
}

Status QGemm(const QGemmCall& c, int threads) {
  const CpuGemmWeights* weights = static_cast<const CpuGemmWeights*>(c.packed_b);
  const QMatrix& am = c.a;
  const QMatrix& bm = c.b;
  const int64_t rows = c.rows, N = c.N, K = c.K;
  const bool bytes = weights && weights->b8 && c.a.zero_point->size() == 1 && AllowQ8Kernel();
  // With its AVX-512 VNNI tile the byte kernel beats oneDNN's int8 GEMM on every shape
  // tests/bench/qgemm_bench.cc times (1.7-8x: the per-call packing of dnnl_gemm_u8s8s32).
  const bool wide_bytes = bytes && qgemm_internal::Q8Avx512Vnni() && DefaultQGemmBackend() == QGemmBackend::kAuto;
  if (!wide_bytes && PreferOneDnnQGemm(am, bm, rows, N, K)) {
    std::vector<int32_t> acc(static_cast<size_t>(rows * N));
    const int onednn_threads = rows * N * K >= (int64_t{1} << 21) ? threads : 1;  // as in ConvOneDnn
    if (QGemmAccOneDnn(am, bm, rows, N, K, acc.data(), onednn_threads)) {
      QEpilogueCpu(*c.out, acc.data(), rows, N, false, 0, c.y, N, onednn_threads);
      return Status::Ok();
    }
  }
  if (bytes) {
    // The byte kernel: activations as unsigned bytes (int8 shifted by 128), weights as packed.
    const bool s8 = c.a.dtype == DType::kInt8;
    QPacked8 pa;
    Q8PackActivationsA(c.a.data, rows, K, K, s8 ? 0x80 : 0, &pa, threads);
    QGemmPacked8(pa, *weights->b8, false, (*c.a.zero_point)[0] + (s8 ? 128 : 0), *c.out, false, 0, c.y, N, threads);
    return Status::Ok();
  }
  QPackedA pa;
  QPackA(am, rows, K, &pa, threads);
  if (weights && weights->b) {
    QGemmPacked(pa, *weights->b, *c.out, false, 0, c.y, N, threads);
    return Status::Ok();
  }
  QPackedB pb;
  QPackB(bm, K, N, &pb, threads);
  QGemmPacked(pa, pb, *c.out, false, 0, c.y, N, threads);
  return Status::Ok();
}

QPackedWeights PackConvWeights(const Tensor& w, const std::vector<int32_t>& w_zp, int64_t group) {
  auto packed = std::make_shared<CpuConvWeights>();
  const int64_t M = w.dim(0), K = w.numel() / M, mg = M / group;
  const int8_t* wp = static_cast<const int8_t*>(w.raw_data());
  if (w.dtype() == DType::kInt8 && group == 1 && (w.rank() == 3 || w.rank() == 4)) {
    auto nhwc = std::make_shared<QConvNhwcWeights>();
    if (QPackConvWeightsNhwc(wp, M, w.dim(1), w.dims().data() + 2, static_cast<int>(w.rank()) - 2, w_zp,
                             nhwc.get())) {
      packed->nhwc = std::move(nhwc);
      return packed;
    }
  }
  const bool zero_zp = std::all_of(w_zp.begin(), w_zp.end(), [](int32_t z) { return z == 0; });
  if (w.dtype() == DType::kInt8 && w.rank() == 4 && group == M && w.dim(1) == 1 && zero_zp &&
      w.dim(2) * w.dim(3) <= kMaxDepthwiseTaps)
    packed->depthwise = std::make_shared<const DepthwiseWeights>(PackDepthwiseWeights(wp, M, w.dim(2), w.dim(3)));
  if (w.dtype() == DType::kInt8 && w.rank() <= 4 && Q8WeightsFit(wp, M, K, false, w_zp)) {
    auto w8 = std::make_shared<std::vector<QPacked8>>(static_cast<size_t>(group));
    for (int64_t g = 0; g < group; ++g) Q8PackWeightsA(wp + g * mg * K, mg, K, &(*w8)[static_cast<size_t>(g)]);
    packed->w8 = std::move(w8);
  } else {
    packed->w = PackInt16ConvWeights(w, w_zp, group);
  }
  return packed;
}

namespace {

// Whether c can run on the channels-last byte kernel (QConvNhwc).
bool NhwcEligible(const QConvCall& c) {
  const CpuConvWeights* weights = static_cast<const CpuConvWeights*>(c.packed_w);
  return weights && weights->nhwc && AllowQ8Kernel() && c.shape->group == 1 && c.shape->geo.spatial <= 2;
}

// Whether c goes to oneDNN (tried first; it may still refuse and fall back): where its GEMM fits
// and, unless WHITTLE_QGEMM=onednn forces it, the byte kernel cannot take c (measured with
// AVX512-VNNI, batch 64, 1 thread: the byte kernel ran the CNN 1.56x and the residual CNN 1.07x
// faster than oneDNN's GEMM on the im2col).
bool PrefersOneDnnConv(const QConvCall& c) {
  const ConvShape& s = *c.shape;
  if (s.group != 1 || s.geo.spatial > 2 || c.x->dtype() != DType::kUInt8) return false;
  if (NhwcEligible(c) && DefaultQGemmBackend() != QGemmBackend::kOneDnn) return false;
  const std::vector<int32_t> xzp{c.x_zp};
  const QMatrix am{c.x->raw_data(), c.x->dtype(), 0, &xzp};
  const QMatrix bm{c.w->raw_data(), c.w->dtype(), 0, c.w_zp};
  return PreferOneDnnQGemm(am, bm, s.out_channels, s.batch * s.geo.OutSize(), c.w->numel() / s.out_channels);
}

// Whether c runs on the channels-last byte kernel.
bool TakesNhwcPath(const QConvCall& c) { return NhwcEligible(c) && !PrefersOneDnnConv(c); }

}  // namespace

bool QConvPools(const QConvCall& c) {
  if (!TakesNhwcPath(c)) return false;
  for (float m : c.out->multiplier)
    if (!(m >= 0.f)) return false;  // the pool is taken before the epilogue, which must be monotone
  return true;
}

// The scratch QConv's image blocks pack (the int16 planes or im2col panels, the padded path's
// output rows at the padded pitch), one set per block in flight, held to the memory budget on the
// calling thread before the parallel region: the sizes come from the model's dims (a fuzzed
// ConvInteger asked for 48 GiB of planes), and an allocation failing inside the OpenMP team
// could not be reported. In 128 bits: padded dims may pass 2^63.
static void CheckQConvScratch(const ConvShape& s, bool padded, int64_t mg, int64_t out_size, size_t y_es, int threads) {
  using I = __int128;
  const WindowGeometry& g = s.geo;
  const I cg = s.in_channels / s.group, K = cg * g.KernelSize();
  I elems16 = 0, bytes = 0;
  if (padded) {
    const I wp = I{g.in[1]} + g.pad_begin[1] + g.pad_end[1];
    const I plane = (I{g.in[0]} + g.pad_begin[0] + g.pad_end[0]) * wp + I{g.dilation[1]} * (g.kernel[1] - 1) + 16;
    const I N = I{g.out[0]} * wp;
    elems16 = cg * plane + (N + kQNr) * (K + 2);
    bytes = I{mg} * N * static_cast<I>(y_es);
  } else {
    elems16 = (I{out_size} + kQNr) * (K + 2);
  }
  const I blocks = s.batch >= threads ? std::min<I>(s.batch, 4 * I{threads}) : 1;
  const I total = blocks * (2 * elems16 + bytes);
  CheckScratch(total > INT64_MAX ? INT64_MAX : static_cast<int64_t>(total), 1, "QConv");
}

Status QConv(const QConvCall& c, int threads) {
  const CpuConvWeights* weights = static_cast<const CpuConvWeights*>(c.packed_w);
  const ConvShape& s = *c.shape;
  const Tensor& x = *c.x;
  const Tensor& w = *c.w;
  Tensor& y = *c.y;
  const int32_t x_zp = c.x_zp;
  const int64_t out_size = s.geo.OutSize();
  if (c.max_pool) {
    if (!QConvPools(c) || static_cast<int>(c.max_pool->size()) != s.geo.spatial)
      return Internal("QConv: a fused max pool reached a path that cannot pool");
    QConvNhwc(s, *weights->nhwc, x.raw_data(), x.dtype(), x_zp, *c.out, y.raw_data(), threads, c.max_pool->data());
    return Status::Ok();
  }
  if (PrefersOneDnnConv(c) && ConvOneDnn(c, s, x, w, y, threads)) return Status::Ok();
  if (TakesNhwcPath(c)) {
    QConvNhwc(s, *weights->nhwc, x.raw_data(), x.dtype(), x_zp, *c.out, y.raw_data(), threads);
    return Status::Ok();
  }
  if (AllowQ8Kernel() && DepthwiseEligible(c)) return DepthwiseBytes(c, s, x, y, threads);
  if (weights && weights->w8 && AllowQ8Kernel() && s.geo.spatial <= 2) return ConvBytes(c, *weights, s, x, y, threads);
  std::shared_ptr<const std::vector<QPackedA>> packed = weights ? weights->w : nullptr;
  if (!packed) packed = PackInt16ConvWeights(w, *c.w_zp, s.group);
  const int64_t mg = s.out_channels / s.group;
  const int64_t in_image = s.in_channels * s.geo.InSize();
  const size_t x_es = 1, y_es = qgemm_internal::OutElemSize(y.dtype());
  const bool padded = QConvUsesPaddedPlanes(s);
  CheckQConvScratch(s, padded, mg, out_size, y_es, threads);
  // Images in parallel at batch >= threads (each block packs its own im2col); else threads in
  // the GEMM.
  qgemm_internal::ForImageBlocks(s.batch, threads, [&](int64_t n0, int64_t n1, int gemm_threads) {
    QPackedB col;
    std::vector<int16_t> planes;
    std::vector<char> tmp;
    for (int64_t n = n0; n < n1; ++n) {
      const char* xi = static_cast<const char*>(x.raw_data()) + static_cast<size_t>(n * in_image) * x_es;
      for (int64_t g = 0; g < s.group; ++g) {
        char* yp = static_cast<char*>(y.raw_data()) +
                   static_cast<size_t>((n * s.out_channels + g * mg) * out_size) * y_es;
        const QPackedA& w = (*packed)[static_cast<size_t>(g)];
        if (padded) {  // no im2col copy; computed at the padded row pitch, then compacted
          int64_t pitch = 0;
          QPackConvPadded(s, xi, x.dtype(), x_zp, g, &planes, &col, &pitch);
          tmp.resize(static_cast<size_t>(mg * col.N) * y_es);
          QGemmPacked(w, col, *c.out, true, g * mg, tmp.data(), col.N, gemm_threads);
          QCompactConvRows(tmp.data(), mg, s.geo.out[0], s.geo.out[1], pitch, y_es, yp);
        } else {
          QPackIm2Col(s, xi, x.dtype(), x_zp, g, &col);
          QGemmPacked(w, col, *c.out, true, g * mg, yp, out_size, gemm_threads);
        }
      }
    }
  });
  return Status::Ok();
}

const QLinearFns kQLinearFns{PackGemmWeights, QGemm, PackConvWeights, QConv, nullptr, QConvPools};

}  // namespace whittle::cpu
