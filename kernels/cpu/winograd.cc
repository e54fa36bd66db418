#include "kernels/cpu/winograd.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/vmath.h"

namespace whittle::cpu {
namespace {

// Per-thread scratch, grown on demand and kept: V and M of one band.
float* Scratch(int slot, size_t n) {
  thread_local std::vector<float> bufs[2];
  std::vector<float>& buf = bufs[slot];
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

// Tiles per band: about 48 (V and M of a 32-channel band then fit in L2 with room), whole tile
// rows so that an activation other than Relu can run over each output block's contiguous rows.
int64_t BandRows(int64_t th, int64_t tw, int64_t batch, int threads) {
  const int64_t target = 48;
  int64_t rows = std::clamp<int64_t>(target / tw, 1, th);
  // Enough bands to keep every thread busy on small batches.
  while (rows > 1 && batch * ((th + rows - 1) / rows) < 2 * static_cast<int64_t>(threads)) rows = (rows + 1) / 2;
  return rows;
}

// One ISA's kernels (winograd_impl.h).
struct IsaKernels {
  decltype(&winograd_avx2::InputTransform) input;
  decltype(&winograd_avx2::Gemm16) gemm;
  decltype(&winograd_avx2::OutputTransform) output;
};
constexpr IsaKernels kAvx2{winograd_avx2::InputTransform, winograd_avx2::Gemm16, winograd_avx2::OutputTransform};
constexpr IsaKernels kAvx512{winograd_avx512::InputTransform, winograd_avx512::Gemm16,
                             winograd_avx512::OutputTransform};

}  // namespace

bool WinogradConv::Enabled() {
  static const bool on = [] {
    const char* e = std::getenv("WHITTLE_WINOGRAD");
    if (e && std::strcmp(e, "0") == 0) return false;
    return ActiveSimdIsa() != SimdIsa::kScalar;  // AVX2 + FMA or AVX-512
  }();
  return on;
}

WinogradConv::WinogradConv(const float* w, const float* bias, int64_t out_channels, int64_t in_channels,
                           SimdIsa isa)
    : k_(out_channels), c_(in_channels) {
  const SimdIsa capped = static_cast<int>(isa) <= static_cast<int>(CpuSimdIsa()) ? isa : CpuSimdIsa();
  width_ = capped == SimdIsa::kAvx512 ? winograd_avx512::kWidth : capped == SimdIsa::kAvx2 ? winograd_avx2::kWidth : 0;
  // U = G g G^T per (k, c), G = [[1, 0, 0], [1/2, 1/2, 1/2], [1/2, -1/2, 1/2], [0, 0, 1]].
  static const double G[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
  u_.assign(static_cast<size_t>(16 * c_ * k_), 0.f);
  for (int64_t k = 0; k < k_; ++k)
    for (int64_t c = 0; c < c_; ++c) {
      const float* g = w + (k * c_ + c) * 9;
      double gg[4][3];  // G g
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 3; ++j) gg[i][j] = G[i][0] * g[j] + G[i][1] * g[3 + j] + G[i][2] * g[6 + j];
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) {
          const double v = gg[i][0] * G[j][0] + gg[i][1] * G[j][1] + gg[i][2] * G[j][2];
          u_[static_cast<size_t>(((4 * i + j) * c_ + c) * k_ + k)] = static_cast<float>(v);
        }
    }
  bias_.assign(static_cast<size_t>(k_), 0.f);
  if (bias) std::copy(bias, bias + k_, bias_.begin());
}

bool WinogradConv::Applies(const ConvShape& s, int64_t block) const {
  if (!Enabled() || width_ == 0 || s.geo.spatial != 2 || s.group != 1 || s.in_channels != c_ ||
      s.out_channels != k_)
    return false;
  if (c_ % width_ != 0 || k_ % width_ != 0 || c_ > kWinogradMaxChannels || k_ > kWinogradMaxChannels)
    return false;
  // NHWC (block 0) is one block of all channels: C on the input, K on the output.
  if (block != 0 && (block % width_ != 0 || c_ % block != 0 || k_ % block != 0)) return false;
  const Geo2D g = To2D(s.geo);
  return g.kh == 3 && g.kw == 3 && g.sh == 1 && g.sw == 1 && g.dh == 1 && g.dw == 1 && g.oh > 0 && g.ow > 0;
}

bool WinogradConv::Preferred(const ConvShape& s) const {
  if (width_ != winograd_avx512::kWidth) return true;
  const Geo2D g = To2D(s.geo);
  const int64_t padded = ((g.oh + 1) / 2 * 2) * ((g.ow + 1) / 2 * 2);
  // At least 32 tiles per image: each image's GEMMs stream all 16 transformed weight matrices,
  // which a few tiles do not pay for (256->256 on 8x8, 16 tiles, batch 1: 605 us against
  // oneDNN's 405; on 14x14, 49 tiles, they tie, on 16x16 Winograd wins by a quarter).
  return c_ * k_ >= 512 && 10 * padded <= 11 * g.oh * g.ow && padded / 4 >= 32;
}

void WinogradConv::Run(const ConvShape& s, int64_t block, const float* x, const float* sum,
                       const FusedActivation& act, int threads, float* y) const {
  const Geo2D g = To2D(s.geo);
  const int64_t th = (g.oh + 1) / 2, tw = (g.ow + 1) / 2;
  const int64_t rows = BandRows(th, tw, s.batch, threads), bands = (th + rows - 1) / rows;
  const int64_t in_image = c_ * g.ih * g.iw, out_image = k_ * g.oh * g.ow;
  const bool relu = act.kind == FusedActivation::kRelu;
  const int64_t bin = block ? block : c_, bout = block ? block : k_;
  const int64_t max_tiles = rows * tw;
  const IsaKernels& isa = width_ == winograd_avx512::kWidth ? kAvx512 : kAvx2;
  ParallelFor(s.batch * bands, threads, [&](int64_t item) {
    const int64_t n = item / bands, band = item % bands;
    const int64_t t0 = band * rows * tw, tiles = std::min(th, (band + 1) * rows) * tw - t0;
    const int64_t vstride = max_tiles * c_, mstride = max_tiles * k_;
    float* v = Scratch(0, static_cast<size_t>(16 * vstride));
    float* m = Scratch(1, static_cast<size_t>(16 * mstride));
    float* yn = y + n * out_image;
    const float* sn = sum ? sum + n * out_image : nullptr;
    isa.input(x + n * in_image, c_, bin, g.ih, g.iw, g.pt, g.pl, tw, t0, tiles, v, vstride);
    isa.gemm(v, vstride, u_.data(), c_, k_, tiles, m, mstride);
    isa.output(m, mstride, k_, bout, g.oh, g.ow, tw, t0, tiles, bias_.data(), sn, relu, yn);
    if (act.kind != FusedActivation::kNone && !relu) {
      // The band's output rows are contiguous in each block of channels.
      const int64_t r0 = 2 * (t0 / tw), r1 = std::min(g.oh, 2 * ((t0 + tiles) / tw));
      for (int64_t q = 0; q < k_ / bout; ++q)
        act.Apply(yn + (q * g.oh + r0) * g.ow * bout, (r1 - r0) * g.ow * bout);
    }
  });
}

}  // namespace whittle::cpu
