#include "kernels/cpu/conv_direct.h"

#include <algorithm>
#include <cstring>

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/sgemm.h"

namespace whittle::cpu {
namespace {

using TileFn = void (*)(const float*, int64_t, int64_t, const int32_t*, int, const float*, float*);

// Padded input buffers, one per thread, grown on demand and kept.
float* PaddedScratch(size_t n) {
  thread_local std::vector<float> buf;
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

struct Layout {
  int64_t pw, ph, cstride, plen, tiles, slack;
};

}  // namespace

DirectConv::DirectConv(const float* w, int64_t out_channels, int64_t cg, int64_t kh, int64_t kw, int64_t group,
                       SimdIsa isa)
    : isa_(static_cast<int>(isa) <= static_cast<int>(CpuSimdIsa()) ? isa : CpuSimdIsa()),
      out_channels_(out_channels), cg_(cg), kh_(kh), kw_(kw), group_(group) {
  if (isa_ == SimdIsa::kAvx512) {
    ocb_ = conv_direct_avx512::kOcBlock;
    tile_width_ = conv_direct_avx512::kTileWidth;
  } else if (isa_ == SimdIsa::kAvx2) {
    ocb_ = conv_direct_avx2::kOcBlock;
    tile_width_ = conv_direct_avx2::kTileWidth;
  } else {
    return;
  }
  const int64_t mg = out_channels / group, taps = kh * kw;
  blocks_ = (mg + ocb_ - 1) / ocb_;
  packed_.assign(static_cast<size_t>(group * blocks_ * cg * taps * ocb_), 0.f);
  for (int64_t g = 0; g < group; ++g)
    for (int64_t b = 0; b < blocks_; ++b)
      for (int64_t o = 0; o < ocb_ && b * ocb_ + o < mg; ++o) {
        const int64_t m = g * mg + b * ocb_ + o;
        for (int64_t c = 0; c < cg; ++c)
          for (int64_t t = 0; t < taps; ++t)
            packed_[static_cast<size_t>((((g * blocks_ + b) * cg + c) * taps + t) * ocb_ + o)] =
                w[(m * cg + c) * taps + t];
      }
}

bool DirectConv::Applies(const ConvShape& s) const {
  if (ocb_ == 0 || s.geo.spatial != 2 || s.group != group_ || s.out_channels != out_channels_ ||
      s.in_channels != cg_ * group_)
    return false;
  const Geo2D g = To2D(s.geo);
  if (g.kh != kh_ || g.kw != kw_ || g.sh != 1 || g.sw != 1) return false;
  // Flat offsets are int32; keep every padded plane well inside that.
  return (g.ih + g.pt + g.pb) * (g.iw + g.pl + g.pr) < (int64_t{1} << 28) && g.oh > 0 && g.ow > 0;
}

void DirectConv::Run(const ConvShape& s, const float* x, const float* bias, const float* sum,
                     const FusedActivation& act, int threads, float* y) const {
  const Geo2D g = To2D(s.geo);
  const TileFn tile_fn = isa_ == SimdIsa::kAvx512 ? &conv_direct_avx512::Tile : &conv_direct_avx2::Tile;
  const int taps = static_cast<int>(kh_ * kw_);
  const int tw = tile_width_, ocb = ocb_;
  Layout l;
  l.pw = g.iw + g.pl + g.pr;
  l.ph = g.ih + g.pt + g.pb;
  l.cstride = l.ph * l.pw;
  l.plen = g.oh * l.pw;
  l.tiles = (l.plen + tw - 1) / tw;
  // The last tile reads up to tw - 1 past the last output position plus the largest tap offset.
  l.slack = tw + kw_ * g.dw + 16;
  const size_t image_floats = static_cast<size_t>(s.in_channels * l.cstride + l.slack);
  std::vector<int32_t> offs(static_cast<size_t>(taps));
  for (int64_t a = 0; a < kh_; ++a)
    for (int64_t b = 0; b < kw_; ++b) offs[static_cast<size_t>(a * kw_ + b)] = static_cast<int32_t>(a * g.dh * l.pw + b * g.dw);
  const int64_t mg = out_channels_ / group_, in_plane = g.ih * g.iw, out_plane = g.oh * g.ow;

  auto pad = [&](const float* xn, float* p) {
    for (int64_t c = 0; c < s.in_channels; ++c) {
      float* pc = p + c * l.cstride;
      const float* xc = xn + c * in_plane;
      for (int64_t r = 0; r < l.ph; ++r) {
        float* dst = pc + r * l.pw;
        const int64_t ih = r - g.pt;
        if (ih < 0 || ih >= g.ih) {
          std::memset(dst, 0, static_cast<size_t>(l.pw) * sizeof(float));
          continue;
        }
        for (int64_t i = 0; i < g.pl; ++i) dst[i] = 0.f;
        std::memcpy(dst + g.pl, xc + ih * g.iw, static_cast<size_t>(g.iw) * sizeof(float));
        for (int64_t i = g.pl + g.iw; i < l.pw; ++i) dst[i] = 0.f;
      }
    }
    std::memset(p + s.in_channels * l.cstride, 0, static_cast<size_t>(l.slack) * sizeof(float));
  };

  // One tile: output channels [block*ocb, +ocb) of group grp, flat positions [t*tw, +tw).
  auto tile = [&](int64_t n, const float* p, int64_t grp, int64_t block, int64_t t) {
    alignas(64) float acc[8 * 48];
    const int64_t p0 = t * tw;
    tile_fn(p + grp * cg_ * l.cstride + p0, l.cstride, cg_, offs.data(), taps,
            packed_.data() + static_cast<size_t>((grp * blocks_ + block) * cg_ * taps * ocb), acc);
    const int64_t p1 = std::min(p0 + tw, l.plen);
    const int64_t valid = std::min<int64_t>(ocb, mg - block * ocb);
    for (int64_t o = 0; o < valid; ++o) {
      const int64_t m = grp * mg + block * ocb + o;
      const float* a = acc + o * tw;
      const float bv = bias ? bias[m] : 0.f;
      float* ym = y + (n * s.out_channels + m) * out_plane;
      const float* sm = sum ? sum + (n * s.out_channels + m) * out_plane : nullptr;
      for (int64_t q = p0; q < p1;) {
        const int64_t oh = q / l.pw, xq = q - oh * l.pw;
        const int64_t row_end = std::min(p1, (oh + 1) * l.pw);
        if (xq < g.ow) {
          const int64_t cnt = std::min(row_end, oh * l.pw + g.ow) - q;
          float* dst = ym + oh * g.ow + xq;
          const float* src = a + (q - p0);
          for (int64_t i = 0; i < cnt; ++i) dst[i] = src[i] + bv;
          BiasActivationRow(dst, cnt, 0.f, sm ? sm + oh * g.ow + xq : nullptr, act);
        }
        q = row_end;
      }
    }
  };

  const int64_t per_image = group_ * blocks_ * l.tiles;
  if (threads <= 1 || s.batch >= threads) {
    ParallelFor(s.batch, threads, [&](int64_t n) {
      float* p = PaddedScratch(image_floats);
      pad(x + n * s.in_channels * in_plane, p);
      for (int64_t i = 0; i < per_image; ++i)
        tile(n, p, i / (blocks_ * l.tiles), i / l.tiles % blocks_, i % l.tiles);
    });
    return;
  }
  float* p = PaddedScratch(image_floats);  // this thread's; the team only reads it
  for (int64_t n = 0; n < s.batch; ++n) {
    pad(x + n * s.in_channels * in_plane, p);
    // Tiles of the same position range next to each other: the team shares the input rows.
    ParallelFor(per_image, threads, [&](int64_t i) {
      const int64_t t = i / (group_ * blocks_), rest = i % (group_ * blocks_);
      tile(n, p, rest / blocks_, rest % blocks_, t);
    });
  }
}

}  // namespace whittle::cpu
