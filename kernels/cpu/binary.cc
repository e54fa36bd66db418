// CPU kernels of ai.whittle BinaryMatMul and BinaryConv (bit layout: lib/ir/binary_format.h).
// activations=binary: each row of A (a Conv: each im2col row of a sample) is packed into sign
// bits once per call, then binary_gemm.h's XorPopcount gives popcount(a XOR w) per output, on the
// widest path the CPU runs (AVX-512 VPOPCNTDQ, AVX2 vpshufb, POPCNT); dot = K - 2 * count.
// Conv rows whose window reaches into the padding are recounted under a mask of their valid taps
// (padding adds 0, not -1). activations=float: BinaryMatMul keeps sign masks laid out once at
// load in panel order (1 bit per weight). On AVX-512 they are the write masks of adds of x
// (binary_gemm.h's SignMaskGemm: no multiply in the k loop, no decode; half the adds issued as
// masked FMAs by 1 so that Zen's add and FMA pipes both work: 1.4x the packed FP32 GEMM at
// M = 64, N = K = 1024, 2.4x at M = 1). AVX2 has no masked adds: up to 4 rows the masks turn
// into sign bits XORed into x before an add (SignXorGemm); above, they are decoded per call into
// the packed GEMM's panel layout as +-alpha (a select, no multiply) and the GEMM's register
// tiles run on them. BinaryConv with float activations
// decodes sign * alpha once at load and runs the CPU Conv kernel (its direct paths beat an
// im2col + GEMM at small channel counts; a Conv weight is small). Without AVX2 the float mode has
// no fast path (the reference kernel runs).
#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "kernels/cpu/binary.h"
#include "kernels/cpu/binary_gemm.h"
#include "kernels/cpu/binary_scalar_impl.h"
#include "kernels/cpu/isa/features.h"
#include "kernels/cpu/packed_gemm.h"
#include "kernels/cpu/parallel.h"

namespace whittle {
namespace cpu {

namespace binary_portable {
void XorPopcount(int64_t rows, const uint64_t* a, int64_t lda, const uint64_t* w, int64_t n, int64_t words,
                 int32_t* out, int64_t ldo) {
  XorPopcountRows(rows, a, lda, w, n, words, out, ldo);
}
}  // namespace binary_portable

bool CpuHasPopcountPath(PopcountPath p) {
  const IsaFeatures& f = CpuFeaturesUncapped();
  switch (p) {
    case PopcountPath::kPortable: return true;
    case PopcountPath::kPopcnt: return f.popcnt;
    case PopcountPath::kAvx2: return CpuSimdIsa() >= SimdIsa::kAvx2 && f.popcnt;
    case PopcountPath::kAvx512:
      return CpuSimdIsa() == SimdIsa::kAvx512 && f.avx512vpopcntdq && f.avx512vl && f.avx512bw;
  }
  return false;
}

PopcountPath ActivePopcountPath() {
  static const PopcountPath path = [] {
    const SimdIsa isa = ActiveSimdIsa();
    if (isa == SimdIsa::kAvx512 && CpuHasPopcountPath(PopcountPath::kAvx512)) return PopcountPath::kAvx512;
    if (isa >= SimdIsa::kAvx2 && CpuHasPopcountPath(PopcountPath::kAvx2)) return PopcountPath::kAvx2;
    return CpuHasPopcountPath(PopcountPath::kPopcnt) ? PopcountPath::kPopcnt : PopcountPath::kPortable;
  }();
  return path;
}

const char* PopcountPathName(PopcountPath p) {
  switch (p) {
    case PopcountPath::kPortable: return "portable";
    case PopcountPath::kPopcnt: return "popcnt";
    case PopcountPath::kAvx2: return "avx2";
    case PopcountPath::kAvx512: return "avx512-vpopcntdq";
  }
  return "?";
}

XorPopcountFn XorPopcountFor(PopcountPath p) {
  if (!CpuHasPopcountPath(p)) p = PopcountPath::kPortable;
  switch (p) {
    case PopcountPath::kAvx512: return binary_avx512::XorPopcount;
    case PopcountPath::kAvx2: return binary_avx2::XorPopcount;
    case PopcountPath::kPopcnt: return binary_popcnt::XorPopcount;
    case PopcountPath::kPortable: break;
  }
  return binary_portable::XorPopcount;
}

PackSignsFn PackSignsFor(PopcountPath p) {
  if (!CpuHasPopcountPath(p)) p = PopcountPath::kPortable;
  if (p == PopcountPath::kAvx512) return binary_avx512::PackSigns;
  if (p == PopcountPath::kAvx2) return binary_avx2::PackSigns;
  return whittle::PackSigns;
}

namespace {

constexpr int64_t kGroup = 4;  // float mode: panels per task
// AVX2, activations=float: up to this many rows, SignXorGemm (2 + 2 rows vector ops per 16
// columns and k, nothing decoded) beats decoding the panels for the packed GEMM's FMAs
// (binarized cnn.onnx, WHITTLE_ISA=avx2: batch 1 34.9K -> 47.2K samples/s, 2: 43.8K -> 57.0K,
// 4: 50.7K -> 59.8K, 8: 63.4K -> 61.2K).
constexpr int64_t kSignXorRows = 4;

// Sign masks of output channels [n0, n0 + n) of bits in packed-GEMM panel order: mask p*K + k has
// bit j set when W[n0 + p*nr + j, k] >= 0; alpha likewise per panel column (0 past n).
struct SignPanels {
  bool wide = false;
  int64_t nr = 0, panels = 0, k = 0;
  std::vector<uint32_t> masks;
  std::vector<float> alpha;

  SignPanels(const uint64_t* bits, const float* a, int64_t n0, int64_t n, int64_t K, bool w) : wide(w), k(K) {
    nr = wide ? packed_gemm_avx512::kNr : packed_gemm_avx2::kNr;
    panels = (n + nr - 1) / nr;
    const int64_t stored = (panels + kGroup - 1) / kGroup * kGroup, words = BinaryWords(K);
    masks.assign(static_cast<size_t>(stored * K), 0u);
    alpha.assign(static_cast<size_t>(stored * nr), 0.f);
    for (int64_t j = 0; j < n; ++j) {
      alpha[static_cast<size_t>(j)] = a[n0 + j];
      uint32_t* m = masks.data() + (j / nr) * K;
      const uint64_t* row = bits + (n0 + j) * words;
      for (int64_t i = 0; i < K; ++i) m[i] |= static_cast<uint32_t>(BinaryBit(row, i)) << (j % nr);
    }
  }

  void Decode(int64_t p, float* out) const {
    (wide ? binary_avx512::DecodeSignPanel : binary_avx2::DecodeSignPanel)(masks.data() + p * k, k,
                                                                           alpha.data() + p * nr, out);
  }

  // Y[r, col0 + c] for rows r < M, columns of panels [p0, p0 + used) decoded at buf.
  void Tiles(int64_t M, const float* A, int64_t lda, const float* buf, int64_t used, int64_t col0, int64_t n,
             float* Y, int64_t ldc, const float* bias, bool relu) const {
    const int max_rows = wide ? packed_gemm_avx512::kMaxRows : packed_gemm_avx2::kMaxRows;
    const auto tile = wide ? &packed_gemm_avx512::Tile : &packed_gemm_avx2::Tile;
    const int64_t stride = k * nr;
    for (int64_t r0 = 0; r0 < M; r0 += max_rows) {
      const int rows = static_cast<int>(std::min<int64_t>(max_rows, M - r0));
      const int np = PackedGemmPanelsPerTile(rows);
      for (int64_t p = 0; p < used; p += np) {
        const int64_t c0 = col0 + p * nr;
        const int64_t ncols = std::min<int64_t>(n - c0, np * nr);
        const int u = static_cast<int>(std::min<int64_t>(np, used - p));
        tile(rows, u, k, A + r0 * lda, lda, buf + p * stride, stride, Y + r0 * ldc + c0, ldc, ncols,
             bias ? bias + c0 : nullptr, relu);
      }
    }
  }
};

// Packs each of `rows` rows of x (k floats, ldx apart) into words; beta[r] = mean |x_r| when given.
void PackRows(int64_t rows, const float* x, int64_t ldx, int64_t k, uint64_t* out, float* beta, int threads) {
  const int64_t words = BinaryWords(k);
  const PackSignsFn pack = PackSignsFor(ActivePopcountPath());
  ParallelFor(rows, threads, [&](int64_t r) {
    const double s = pack(x + r * ldx, k, out + r * words);
    if (beta) beta[r] = static_cast<float>(s / static_cast<double>(k));
  });
}

}  // namespace

std::vector<uint64_t> InterleaveColumns(const uint64_t* w, int64_t n, int64_t words) {
  std::vector<uint64_t> p(static_cast<size_t>((n + 7) / 8 * words * 8), 0);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < words; ++i) p[static_cast<size_t>((j / 8) * words * 8 + i * 8 + j % 8)] = w[j * words + i];
  return p;
}

std::vector<uint8_t> NibbleColumns(const uint64_t* w, int64_t n, int64_t words) {
  const int64_t pstride = words * 512;
  std::vector<uint8_t> p(static_cast<size_t>((n + 31) / 32 * pstride), 0);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t q = 0; q < words * 16; ++q)
      p[static_cast<size_t>((j / 32) * pstride + q * 32 + j % 32)] = static_cast<uint8_t>((w[j * words + q / 16] >> (4 * (q % 16))) & 15);
  return p;
}

namespace {

class BinaryMatMulKernel : public OpKernel {
 public:
  BinaryMatMulKernel(const BinaryAttrs& a, const Tensor& bits, const Tensor& alpha) : a_(a) {
    const uint64_t* b = bits.data<uint64_t>();
    bits_.assign(b, b + bits.numel());
    if (a.binary) {
      popcount_ = XorPopcountFor(ActivePopcountPath());
      if (ActivePopcountPath() == PopcountPath::kAvx512) panels_bits_ = InterleaveColumns(b, a.n, BinaryWords(a.k));
      if (ActivePopcountPath() == PopcountPath::kAvx2) nibbles_ = NibbleColumns(b, a.n, BinaryWords(a.k));
    } else {
      panels_ = std::make_unique<SignPanels>(b, alpha.data<float>(), 0, a.n, a.k, ActiveSimdIsa() == SimdIsa::kAvx512);
    }
  }

  Status Compute(KernelContext& ctx) const override {
    const int64_t M = ctx.inputs[0]->numel() / a_.k;
    if (M == 0) return Status::Ok();
    const float* A = ctx.inputs[0]->data<float>();
    const float* alpha = ctx.inputs[2]->data<float>();
    const float* bias = ctx.inputs.size() > 3 && ctx.inputs[3] ? ctx.inputs[3]->data<float>() : nullptr;
    float* Y = ctx.outputs[0]->data<float>();
    if (!a_.binary && panels_->wide) {
      // AVX-512: masked adds straight from the sign masks (binary_gemm.h's SignMaskGemm).
      const SignPanels& sp = *panels_;
      thread_local std::vector<float> rowsum;
      rowsum.resize(static_cast<size_t>(M));
      binary_avx512::SumRows(M, A, a_.k, a_.k, rowsum.data());
      const float* rs = rowsum.data();
      // Tasks of (column group, block of 48 rows): a narrow layer (cnn.onnx's fc1: one group of
      // 128 columns) still spreads over the threads at batch 64.
      constexpr int64_t kRowBlock = 48;  // whole 6-row tiles
      const int64_t groups = (sp.panels + kGroup - 1) / kGroup, rblocks = (M + kRowBlock - 1) / kRowBlock;
      ParallelFor(groups * rblocks, ctx.num_threads, [&](int64_t t) {
        const int64_t g = t / rblocks, r0 = (t % rblocks) * kRowBlock, rows = std::min(kRowBlock, M - r0);
        const int64_t j0 = g * kGroup * sp.nr, nb = std::min(kGroup * sp.nr, a_.n - j0);
        binary_avx512::SignMaskGemm(rows, A + r0 * a_.k, a_.k, rs + r0, sp.masks.data() + g * kGroup * a_.k, a_.k, nb,
                                    sp.alpha.data() + j0, bias ? bias + j0 : nullptr, a_.relu, Y + r0 * a_.n + j0,
                                    a_.n);
      });
      return Status::Ok();
    }
    if (!a_.binary && M <= kSignXorRows) {
      const SignPanels& sp = *panels_;
      ParallelFor((sp.panels + kGroup - 1) / kGroup, ctx.num_threads, [&](int64_t g) {
        const int64_t j0 = g * kGroup * sp.nr, nb = std::min(kGroup * sp.nr, a_.n - j0);
        binary_avx2::SignXorGemm(M, A, a_.k, sp.masks.data() + g * kGroup * a_.k, a_.k, nb, sp.alpha.data() + j0,
                                 bias ? bias + j0 : nullptr, a_.relu, Y + j0, a_.n);
      });
      return Status::Ok();
    }
    if (!a_.binary) {
      const SignPanels& sp = *panels_;
      const int64_t stride = a_.k * sp.nr, groups = (sp.panels + kGroup - 1) / kGroup;
      ParallelFor(groups, ctx.num_threads, [&](int64_t g) {
        thread_local std::vector<float> buf;
        buf.resize(static_cast<size_t>(kGroup * stride));
        const int64_t used = std::min(kGroup, sp.panels - g * kGroup);
        for (int64_t p = 0; p < used; ++p) sp.Decode(g * kGroup + p, buf.data() + p * stride);
        sp.Tiles(M, A, a_.k, buf.data(), used, g * kGroup * sp.nr, a_.n, Y, a_.n, bias, a_.relu);
      });
      return Status::Ok();
    }
    const int64_t words = BinaryWords(a_.k);
    std::vector<uint64_t> abits(static_cast<size_t>(M * words));
    std::vector<float> beta(static_cast<size_t>(M));
    PackRows(M, A, a_.k, a_.k, abits.data(), beta.data(), ctx.num_threads);
    const int64_t kCols = nibbles_.empty() ? 64 : 96;  // a whole tile of the panel kernels
    ParallelFor((a_.n + kCols - 1) / kCols, ctx.num_threads, [&](int64_t t) {
      thread_local std::vector<int32_t> cnt;
      const int64_t j0 = t * kCols, nb = std::min(kCols, a_.n - j0);
      cnt.resize(static_cast<size_t>(M * nb));
      if (!panels_bits_.empty())  // j0 is a multiple of 8: a panel boundary
        binary_avx512::XorPopcountPanels(M, abits.data(), words, panels_bits_.data() + (j0 / 8) * words * 8, nb, words,
                                         cnt.data(), nb);
      else if (!nibbles_.empty())  // j0 is a multiple of 32: a panel boundary
        binary_avx2::XorPopcountNibbles(M, abits.data(), words, nibbles_.data() + (j0 / 32) * words * 512, nb, words,
                                        cnt.data(), nb);
      else
        popcount_(M, abits.data(), words, bits_.data() + j0 * words, nb, words, cnt.data(), nb);
      for (int64_t m = 0; m < M; ++m)
        for (int64_t j = 0; j < nb; ++j) {
          const float dot = static_cast<float>(a_.k - 2 * static_cast<int64_t>(cnt[static_cast<size_t>(m * nb + j)]));
          const float v = beta[static_cast<size_t>(m)] * alpha[j0 + j] * dot + (bias ? bias[j0 + j] : 0.f);
          Y[m * a_.n + j0 + j] = a_.relu && !(v > 0.f) ? 0.f : v;
        }
    });
    return Status::Ok();
  }

 private:
  BinaryAttrs a_;
  std::vector<uint64_t> bits_;
  XorPopcountFn popcount_ = nullptr;
  std::vector<uint64_t> panels_bits_;  // InterleaveColumns(bits_) on the AVX-512 path
  std::vector<uint8_t> nibbles_;       // NibbleColumns(bits_) on the AVX2 path
  std::unique_ptr<SignPanels> panels_;
};

class BinaryConvKernel : public OpKernel {
 public:
  // The weight bits are reordered at load from (c, ky, kx) to tap-major (ky, kx, c): bit
  // t * cg + c of a row is tap t of channel c, so that the im2col copies each input pixel's
  // cg channel bits (packed once per call) as one chunk instead of setting bits one by one.
  BinaryConvKernel(const BinaryConvAttrs& a, const Tensor& bits) : a_(a) {
    const int64_t words = BinaryWords(a.b.k), taps = a.window.kernel_shape[0] * a.window.kernel_shape[1];
    const int64_t cg = a.in_channels / a.group;
    bits_.assign(static_cast<size_t>(a.b.n * words), 0);
    for (int64_t m = 0; m < a.b.n; ++m)
      for (int64_t c = 0; c < cg; ++c)
        for (int64_t t = 0; t < taps; ++t)
          if (BinaryBit(bits.data<uint64_t>() + m * words, c * taps + t)) {
            const int64_t k = t * cg + c;
            bits_[static_cast<size_t>(m * words + (k >> 6))] |= uint64_t{1} << (k & 63);
          }
    popcount_ = XorPopcountFor(ActivePopcountPath());
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor& x = *ctx.inputs[0];
    ConvShape s;
    WH_RETURN_IF_ERROR(ResolveBinaryConv(a_, x, &s));
    const WindowGeometry& geo = s.geo;
    const int64_t P = geo.OutSize(), in = geo.InSize(), K = a_.b.k, words = BinaryWords(K);
    const int64_t cg = a_.in_channels / a_.group, mg = a_.b.n / a_.group;
    const int64_t kh = geo.kernel[0], kw = geo.kernel[1];
    if (s.batch == 0 || P == 0) return Status::Ok();
    const float* X = x.data<float>();
    const float* alpha = ctx.inputs[2]->data<float>();
    const float* bias = ctx.inputs.size() > 3 && ctx.inputs[3] ? ctx.inputs[3]->data<float>() : nullptr;
    float* Y = ctx.outputs[0]->data<float>();
    std::vector<float> beta(static_cast<size_t>(s.batch), 1.f);
    ParallelFor(s.batch, ctx.num_threads, [&](int64_t n) {
        double t = 0;
        const float* xs = X + n * a_.in_channels * in;
        for (int64_t i = 0; i < a_.in_channels * in; ++i) t += std::fabs(xs[i]);
        beta[static_cast<size_t>(n)] = static_cast<float>(t / static_cast<double>(a_.in_channels * in));
      });
    ParallelFor(s.batch * a_.group, ctx.num_threads, [&](int64_t t) {
      const int64_t n = t / a_.group, g = t % a_.group;
      const float* xg = X + (n * a_.in_channels + g * cg) * in;
      float* yg = Y + (n * a_.b.n + g * mg) * P;
      {
        thread_local std::vector<uint64_t> abits, mask;
        thread_local std::vector<uint8_t> border;
        thread_local std::vector<int32_t> cnt;
        abits.assign(static_cast<size_t>(P * words), 0);
        mask.assign(static_cast<size_t>(P * words), 0);
        border.assign(static_cast<size_t>(P), 0);
        // Bit im2col: each input pixel's cg channel sign bits are packed once (cw words), then
        // every (output position, tap) inside the input copies them as one chunk at bit t * cg
        // (and all-ones into the mask); a tap in the padding leaves zeros and marks the row for
        // the masked recount. Geometry in locals: through the captures the compiler would reload
        // it after every store.
        const int64_t OW = geo.out[1], IW = geo.in[1], OH = geo.out[0], IH = geo.in[0], sy = geo.stride[0],
                      sx = geo.stride[1], dy = geo.dilation[0], dx = geo.dilation[1], py = geo.pad_begin[0],
                      px = geo.pad_begin[1], nw = words, chan = in, cw = BinaryWords(cg);
        thread_local std::vector<uint64_t> pix;
        pix.assign(static_cast<size_t>(in * cw), 0);
        for (int64_t c = 0; c < cg; ++c) {
          const float* xc = xg + c * chan;
          uint64_t* pc = pix.data() + (c >> 6);
          const uint64_t bit = uint64_t{1} << (c & 63);
          for (int64_t i = 0; i < chan; ++i) pc[i * cw] |= xc[i] >= 0.f ? bit : 0;
        }
        std::vector<uint64_t> ones(static_cast<size_t>(cw), ~uint64_t{0});
        if (cg % 64) ones.back() = (uint64_t{1} << (cg % 64)) - 1;
        // row |= the cg-bit chunk src at bit offset off (chunks never run past the row's K bits).
        auto place = [cg, cw](uint64_t* row, int64_t off, const uint64_t* src) {
          for (int64_t q = 0; q < cw; ++q) {
            const int64_t o = off + q * 64, n = std::min<int64_t>(64, cg - q * 64), w = o >> 6, sh = o & 63;
            row[w] |= src[q] << sh;
            if (sh && sh + n > 64) row[w + 1] |= src[q] >> (64 - sh);
          }
        };
        uint8_t* brd = border.data();
        for (int64_t oy = 0; oy < OH; ++oy)
          for (int64_t ox = 0; ox < OW; ++ox) {
            const int64_t p = oy * OW + ox;
            uint64_t* ar = abits.data() + p * nw;
            uint64_t* mr = mask.data() + p * nw;
            for (int64_t ky = 0; ky < kh; ++ky) {
              const int64_t iy = oy * sy - py + ky * dy;
              for (int64_t kx = 0; kx < kw; ++kx) {
                const int64_t ix = ox * sx - px + kx * dx;
                if (iy < 0 || iy >= IH || ix < 0 || ix >= IW) {
                  brd[p] = 1;
                  continue;
                }
                const int64_t off = (ky * kw + kx) * cg;
                place(ar, off, pix.data() + (iy * IW + ix) * cw);
                place(mr, off, ones.data());
              }
            }
          }
        cnt.resize(static_cast<size_t>(P * mg));
        const uint64_t* wg = bits_.data() + g * mg * words;
        popcount_(P, abits.data(), words, wg, mg, words, cnt.data(), mg);
        // cnt becomes the dot product: K - 2 * count, or over a border row's valid taps only.
        for (int64_t p = 0; p < P; ++p) {
          int32_t* row = cnt.data() + p * mg;
          if (!border[static_cast<size_t>(p)]) {
            for (int64_t m = 0; m < mg; ++m) row[m] = static_cast<int32_t>(K - 2 * static_cast<int64_t>(row[m]));
            continue;
          }
          const uint64_t* ap = abits.data() + p * words;
          const uint64_t* mp = mask.data() + p * words;
          for (int64_t m = 0; m < mg; ++m) {
            int64_t valid = 0, c = 0;
            for (int64_t i = 0; i < words; ++i) {
              valid += __builtin_popcountll(mp[i]);
              c += __builtin_popcountll((ap[i] ^ wg[m * words + i]) & mp[i]);
            }
            row[m] = static_cast<int32_t>(valid - 2 * c);
          }
        }
        const float b = beta[static_cast<size_t>(n)];
        for (int64_t m = 0; m < mg; ++m) {
          const int64_t o = g * mg + m;
          const float scale = b * alpha[o], add = bias ? bias[o] : 0.f;
          float* ym = yg + m * P;
          for (int64_t p = 0; p < P; ++p) ym[p] = scale * static_cast<float>(cnt[static_cast<size_t>(p * mg + m)]) + add;
          if (a_.b.relu)
            for (int64_t p = 0; p < P; ++p) ym[p] = ym[p] > 0.f ? ym[p] : 0.f;
        }
      }
    });
    return Status::Ok();
  }

 private:
  BinaryConvAttrs a_;
  std::vector<uint64_t> bits_;
  XorPopcountFn popcount_ = nullptr;
};

// activations=float BinaryConv: the signs are decoded once at load into the float weight
// sign * alpha and the CPU Conv kernel runs with it (its direct/NCHWc paths beat an im2col of the
// binary panels several times over at the CNN's shapes; a Conv weight is small, and the file
// keeps 1 bit per weight). The products are then those of the float Conv with weights sign * alpha.
class BinaryConvFloatKernel : public OpKernel {
 public:
  static KernelOr Make(const BinaryConvAttrs& a, const KernelInit& init) {
    std::unique_ptr<BinaryConvFloatKernel> k(new BinaryConvFloatKernel);
    const Tensor& bits = *init.const_inputs[1];
    const float* alpha = init.const_inputs[2]->data<float>();
    const int64_t kh = a.window.kernel_shape[0], kw = a.window.kernel_shape[1], words = BinaryWords(a.b.k);
    k->w_ = Tensor(DType::kFloat32, {a.b.n, a.in_channels / a.group, kh, kw});
    for (int64_t m = 0; m < a.b.n; ++m)
      for (int64_t i = 0; i < a.b.k; ++i)
        k->w_.data<float>()[m * a.b.k + i] = BinaryBit(bits.data<uint64_t>() + m * words, i) ? alpha[m] : -alpha[m];
    for (const char* name : {"kernel_shape", "strides", "pads", "dilations", "auto_pad", "group", "_activation"})
      if (const Attribute* at = init.attrs.Find(name)) k->attrs_.Set(name, *at);
    const KernelFactory* conv = KernelRegistry::Global().Find("", "Conv");
    if (!conv) return KernelOr(nullptr);
    const Tensor* bias = init.const_inputs.size() > 3 ? init.const_inputs[3] : nullptr;
    std::vector<DType> dtypes(init.input_dtypes.size(), DType::kFloat32);
    const KernelInit ci{k->attrs_, 17, dtypes, {nullptr, &k->w_, bias}, 1, init.node_name, Backend::kCpu};
    WH_ASSIGN_OR_RETURN(k->conv_, (*conv)(ci));
    if (!k->conv_) return KernelOr(nullptr);
    return std::unique_ptr<OpKernel>(std::move(k));
  }

  Status Compute(KernelContext& ctx) const override {
    KernelContext c;
    c.inputs = {ctx.inputs[0], &w_};
    if (ctx.inputs.size() > 3) c.inputs.push_back(ctx.inputs[3]);
    c.outputs = ctx.outputs;
    c.num_threads = ctx.num_threads;
    return conv_->Compute(c);
  }

 private:
  AttributeMap attrs_;
  Tensor w_;
  std::unique_ptr<OpKernel> conv_;
};

bool Consts(const KernelInit& init) {
  return init.const_inputs.size() > 2 && init.const_inputs[1] && init.const_inputs[2];
}

KernelOr MakeMatMul(const BinaryAttrs& a, const KernelInit& init) {
  if (!Consts(init) || (!a.binary && ActiveSimdIsa() == SimdIsa::kScalar)) return KernelOr(nullptr);
  return std::unique_ptr<OpKernel>(new BinaryMatMulKernel(a, *init.const_inputs[1], *init.const_inputs[2]));
}

KernelOr MakeConv(const BinaryConvAttrs& a, const KernelInit& init) {
  if (!Consts(init) || (!a.b.binary && ActiveSimdIsa() == SimdIsa::kScalar)) return KernelOr(nullptr);
  if (!a.b.binary) return BinaryConvFloatKernel::Make(a, init);
  return std::unique_ptr<OpKernel>(new BinaryConvKernel(a, *init.const_inputs[1]));
}

}  // namespace
const BinaryFns kBinaryFns{MakeMatMul, MakeConv};
}  // namespace cpu
}  // namespace whittle
