#include "kernels/cpu/conv_direct.h"

#include <algorithm>
#include <cstring>

#include "kernels/cpu/parallel.h"

namespace whittle::cpu {
namespace {

using TileFn = void (*)(const float*, int64_t, int64_t, const int32_t*, int, const float*, float*, int64_t);
using EpilogueFn = void (*)(float*, const float*, int64_t, float, const float*, bool);

// Per-thread buffers, grown on demand and kept: the padded input and one task's tiles.
enum ScratchSlot { kPadded = 0, kTiles = 1 };
float* Scratch(ScratchSlot slot, size_t n) {
  thread_local std::vector<float> bufs[2];
  std::vector<float>& buf = bufs[slot];
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

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
  const EpilogueFn epilogue_fn = isa_ == SimdIsa::kAvx512 ? &conv_direct_avx512::Epilogue : &conv_direct_avx2::Epilogue;
  const bool relu = act.kind == FusedActivation::kRelu;
  const int taps = static_cast<int>(kh_ * kw_);
  const int tw = tile_width_, ocb = ocb_;
  const int64_t pw = g.iw + g.pl + g.pr, ph = g.ih + g.pt + g.pb, cstride = ph * pw;
  // The last tile reads up to tw - 1 past the last output position plus the largest tap offset.
  const int64_t slack = tw + kw_ * g.dw + 16;
  const size_t image_floats = static_cast<size_t>(s.in_channels * cstride + slack);
  std::vector<int32_t> offs(static_cast<size_t>(taps));
  for (int64_t a = 0; a < kh_; ++a)
    for (int64_t b = 0; b < kw_; ++b) offs[static_cast<size_t>(a * kw_ + b)] = static_cast<int32_t>(a * g.dh * pw + b * g.dw);
  const int64_t mg = out_channels_ / group_, in_plane = g.ih * g.iw, out_plane = g.oh * g.ow;

  auto pad = [&](const float* xn, float* p) {
    for (int64_t c = 0; c < s.in_channels; ++c) {
      float* pc = p + c * cstride;
      const float* xc = xn + c * in_plane;
      for (int64_t r = 0; r < ph; ++r) {
        float* dst = pc + r * pw;
        const int64_t ih = r - g.pt;
        if (ih < 0 || ih >= g.ih) {
          std::memset(dst, 0, static_cast<size_t>(pw) * sizeof(float));
          continue;
        }
        for (int64_t i = 0; i < g.pl; ++i) dst[i] = 0.f;
        std::memcpy(dst + g.pl, xc + ih * g.iw, static_cast<size_t>(g.iw) * sizeof(float));
        for (int64_t i = g.pl + g.iw; i < pw; ++i) dst[i] = 0.f;
      }
    }
    std::memset(p + s.in_channels * cstride, 0, static_cast<size_t>(slack) * sizeof(float));
  };

  // Rows per task: about eight tiles of positions, so the epilogue runs on whole rows and a
  // task's buffer stays in L1/L2.
  const int64_t rows_per_chunk = std::max<int64_t>(1, 8 * tw / pw);
  const int64_t chunks = (g.oh + rows_per_chunk - 1) / rows_per_chunk;
  const int64_t ld_max = ((rows_per_chunk * pw + tw - 1) / tw) * tw;

  // Output channels [block*ocb, +ocb) of group grp, output rows [r0, r1), image n.
  auto task = [&](int64_t n, const float* p, int64_t grp, int64_t block, int64_t chunk) {
    float* buf = Scratch(kTiles, static_cast<size_t>(ocb * ld_max));
    const int64_t r0 = chunk * rows_per_chunk, r1 = std::min(g.oh, r0 + rows_per_chunk);
    const int64_t q0 = r0 * pw, len = (r1 - r0) * pw, tiles = (len + tw - 1) / tw, ld = tiles * tw;
    const float* in = p + grp * cg_ * cstride + q0;
    const float* wb = packed_.data() + static_cast<size_t>((grp * blocks_ + block) * cg_ * taps * ocb);
    for (int64_t t = 0; t < tiles; ++t) tile_fn(in + t * tw, cstride, cg_, offs.data(), taps, wb, buf + t * tw, ld);
    const int64_t valid = std::min<int64_t>(ocb, mg - block * ocb);
    for (int64_t o = 0; o < valid; ++o) {
      const int64_t m = grp * mg + block * ocb + o;
      const float bv = bias ? bias[m] : 0.f;
      float* ym = y + (n * s.out_channels + m) * out_plane;
      const float* sm = sum ? sum + (n * s.out_channels + m) * out_plane : nullptr;
      for (int64_t r = r0; r < r1; ++r) {
        const float* src = buf + o * ld + (r - r0) * pw;
        float* dst = ym + r * g.ow;
        epilogue_fn(dst, src, g.ow, bv, sm ? sm + r * g.ow : nullptr, relu);
        if (!relu) act.Apply(dst, g.ow);
      }
    }
  };

  const int64_t per_image = group_ * blocks_ * chunks;
  if (threads <= 1 || s.batch >= threads) {
    ParallelFor(s.batch, threads, [&](int64_t n) {
      float* p = Scratch(kPadded, image_floats);
      pad(x + n * s.in_channels * in_plane, p);
      // Chunk-major: the blocks of one chunk read the same input rows while they are in L1.
      for (int64_t i = 0; i < per_image; ++i) {
        const int64_t chunk = i / (group_ * blocks_), rest = i % (group_ * blocks_);
        task(n, p, rest / blocks_, rest % blocks_, chunk);
      }
    });
    return;
  }
  float* p = Scratch(kPadded, image_floats);  // this thread's; the team only reads it
  for (int64_t n = 0; n < s.batch; ++n) {
    pad(x + n * s.in_channels * in_plane, p);
    // Tasks of the same rows next to each other: the team shares the input rows.
    ParallelFor(per_image, threads, [&](int64_t i) {
      const int64_t chunk = i / (group_ * blocks_), rest = i % (group_ * blocks_);
      task(n, p, rest / blocks_, rest % blocks_, chunk);
    });
  }
}

}  // namespace whittle::cpu
