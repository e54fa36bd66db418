// Winograd F(2x2, 3x3) on the blocked layouts (kernels/cpu/winograd.h) against the reference
// convolution plus bias, residual and activation, and its independence of the thread count.
#include "kernels/cpu/winograd.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "kernels/reference/conv.h"
#include "tests/util/test_util.h"

namespace whittle {
namespace {

using testing::RandomFloat;

// Channel counts and the block in units of the kernels' vector width u (8 on AVX2, 16 on
// AVX-512): x = {N, cu * u, H, W}, K = ku * u, block = bu * u (0: NHWC).
struct WinoCase {
  const char* name;
  int64_t n, cu, h, w, ku;
  std::vector<int64_t> pads;
  int64_t bu;
};

std::vector<WinoCase> Cases() {
  return {
      {"resnet_28x28", 2, 2, 28, 28, 2, {1, 1, 1, 1}, 1},
      {"resnet_14x14", 3, 4, 14, 14, 4, {1, 1, 1, 1}, 1},
      {"odd_output_tiles", 1, 1, 9, 7, 2, {1, 1, 1, 1}, 1},
      {"no_padding", 2, 2, 6, 5, 1, {0, 0, 0, 0}, 1},
      {"asymmetric_pads", 1, 1, 5, 6, 3, {0, 1, 2, 0}, 1},
      {"one_pixel", 1, 1, 1, 1, 1, {1, 1, 1, 1}, 1},
      {"wide_pads", 1, 1, 3, 4, 1, {2, 2, 2, 2}, 1},
      {"block_of_two_vectors", 2, 4, 10, 11, 2, {1, 1, 1, 1}, 2},
      {"nhwc", 2, 2, 7, 8, 3, {1, 1, 1, 1}, 0},
      {"many_tiles_per_gemm", 1, 1, 30, 30, 1, {1, 1, 1, 1}, 1},
  };
}

// y[n][c/b][p][c%b] = x[n][c][p] (b = c for NHWC).
Tensor Blocked(const Tensor& x, int64_t b) {
  const int64_t n = x.dim(0), c = x.dim(1), p = x.dim(2) * x.dim(3);
  if (b == 0) b = c;
  Tensor y(DType::kFloat32, {n, c / b, x.dim(2), x.dim(3), b});
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t q = 0; q < p; ++q)
        y.data<float>()[((i * (c / b) + ch / b) * p + q) * b + ch % b] = x.data<float>()[(i * c + ch) * p + q];
  return y;
}

Tensor Abs(const Tensor& x) {
  Tensor y(DType::kFloat32, x.dims());
  for (int64_t i = 0; i < x.numel(); ++i) y.data<float>()[i] = std::fabs(x.data<float>()[i]);
  return y;
}

TEST(Winograd, MatchesReferenceOnBlockedLayoutsOnEveryIsa) {
  if (!cpu::WinogradConv::Enabled()) {
    std::printf("[  SKIPPED ] no AVX2 + FMA on this CPU (or WHITTLE_WINOGRAD=0): the Winograd path never runs\n");
    return;
  }
  uint32_t seed = 11;
  FusedActivation none, relu, leaky;
  relu.kind = FusedActivation::kRelu;
  leaky.kind = FusedActivation::kLeakyRelu;
  leaky.alpha = 0.1f;
  for (cpu::SimdIsa isa : {cpu::SimdIsa::kAvx2, cpu::SimdIsa::kAvx512}) {
    if (static_cast<int>(cpu::CpuSimdIsa()) < static_cast<int>(isa)) {
      std::printf("[  SKIPPED ] %s kernels: this CPU lacks it\n", cpu::SimdIsaName(isa));
      continue;
    }
    SCOPED_TRACE(cpu::SimdIsaName(isa));
    const int64_t u = isa == cpu::SimdIsa::kAvx512 ? 16 : 8;
    for (const WinoCase& c : Cases()) {
      SCOPED_TRACE(c.name);
      const int64_t cin = c.cu * u, k = c.ku * u, block = c.bu * u;
      const Dims xd{c.n, cin, c.h, c.w}, wd{k, cin, 3, 3};
      const Tensor x = RandomFloat(xd, seed++), w = RandomFloat(wd, seed++), b = RandomFloat({k}, seed++);
      WindowAttrs a;
      a.pads = c.pads;
      ConvShape s;
      ASSERT_TRUE(ResolveConvShape(a, 1, x, w, &b, &s).ok());
      const Dims ydims{c.n, k, s.geo.out[0], s.geo.out[1]};
      const Tensor sum = RandomFloat(ydims, seed++);
      Tensor ref(DType::kFloat32, ydims), mag(DType::kFloat32, ydims);
      ConvReference<float>(s, x.data<float>(), w.data<float>(), b.data<float>(), ref.data<float>());
      // sum |w| |x| per output: what the rounding error scales with.
      ConvReference<float>(s, Abs(x).data<float>(), Abs(w).data<float>(), nullptr, mag.data<float>());
      const Tensor xb = Blocked(x, block), sumb = Blocked(sum, block);
      cpu::WinogradConv conv(w.data<float>(), b.data<float>(), k, cin, isa);
      ASSERT_EQ(conv.width(), u);
      ASSERT_TRUE(conv.Applies(s, block));
      for (int variant = 0; variant < 3; ++variant) {
        const bool with_sum = variant > 0;
        const FusedActivation& act = variant == 0 ? none : variant == 1 ? relu : leaky;
        SCOPED_TRACE(variant == 0 ? "plain" : variant == 1 ? "sum+relu" : "sum+leaky");
        Tensor want(DType::kFloat32, ydims);
        for (int64_t i = 0; i < want.numel(); ++i) {
          float e = ref.data<float>()[i];
          if (with_sum) e += sum.data<float>()[i];
          act.Apply(&e, 1);
          want.data<float>()[i] = e;
        }
        const Tensor wantb = Blocked(want, block), magb = Blocked(mag, block), refb = Blocked(ref, block);
        Tensor first;
        for (int threads : {1, 2}) {
          SCOPED_TRACE("threads=" + std::to_string(threads));
          Tensor y(DType::kFloat32, wantb.dims());
          for (int64_t i = 0; i < y.numel(); ++i) y.data<float>()[i] = std::nanf("");  // all written?
          conv.Run(s, block, xb.data<float>(), with_sum ? sumb.data<float>() : nullptr, act, threads,
                   y.data<float>());
          for (int64_t i = 0; i < y.numel(); ++i) {
            const float e = wantb.data<float>()[i];
            const float tol = 1e-5f * (magb.data<float>()[i] + std::fabs(refb.data<float>()[i]) + 1.f);
            ASSERT_NEAR(y.data<float>()[i], e, tol) << "element " << i;
          }
          if (threads == 1) {
            first = y;
          } else {
            EXPECT_EQ(std::memcmp(first.data<float>(), y.data<float>(), y.numel() * sizeof(float)), 0)
                << "the floats depend on the thread count";
          }
        }
      }
    }
  }
}

TEST(Winograd, RefusesWhatItDoesNotHandle) {
  if (!cpu::WinogradConv::Enabled()) {
    std::printf("[  SKIPPED ] no AVX2 + FMA on this CPU (or WHITTLE_WINOGRAD=0)\n");
    return;
  }
  const Tensor x = RandomFloat({1, 32, 9, 9}, 1), w = RandomFloat({32, 32, 3, 3}, 2);
  cpu::WinogradConv conv(w.data<float>(), nullptr, 32, 32);
  const int64_t u = conv.width();
  ConvShape s;
  ASSERT_TRUE(ResolveConvShape(WindowAttrs(), 1, x, w, nullptr, &s).ok());
  EXPECT_TRUE(conv.Applies(s, u));
  EXPECT_TRUE(conv.Applies(s, 0)) << "NHWC";
  EXPECT_FALSE(conv.Applies(s, u / 2)) << "a block narrower than a vector";
  EXPECT_FALSE(conv.Applies(s, 64)) << "a block that does not divide the channels";
  WindowAttrs strided;
  strided.strides = {2, 2};
  ASSERT_TRUE(ResolveConvShape(strided, 1, x, w, nullptr, &s).ok());
  EXPECT_FALSE(conv.Applies(s, u));
  WindowAttrs dilated;
  dilated.dilations = {2, 2};
  ASSERT_TRUE(ResolveConvShape(dilated, 1, x, w, nullptr, &s).ok());
  EXPECT_FALSE(conv.Applies(s, u));
  const Tensor x12 = RandomFloat({1, 12, 9, 9}, 3), w12 = RandomFloat({32, 12, 3, 3}, 4);
  cpu::WinogradConv conv12(w12.data<float>(), nullptr, 32, 12);
  ASSERT_TRUE(ResolveConvShape(WindowAttrs(), 1, x12, w12, nullptr, &s).ok());
  EXPECT_FALSE(conv12.Applies(s, 0)) << "12 input channels: not a multiple of a vector";
  const Tensor w5 = RandomFloat({32, 32, 5, 5}, 5);
  ASSERT_TRUE(ResolveConvShape(WindowAttrs(), 1, x, w5, nullptr, &s).ok());
  EXPECT_FALSE(conv.Applies(s, u)) << "a 5x5 kernel";
}

// The fixed rule against oneDNN (WinogradConv::Preferred): every shape on the AVX2 kernels; on the
// AVX-512 ones, not where conv_bench measured oneDNN's brgemm ahead.
TEST(Winograd, PreferredFollowsTheMeasuredRule) {
  if (!cpu::WinogradConv::Enabled()) {
    std::printf("[  SKIPPED ] no AVX2 + FMA on this CPU (or WHITTLE_WINOGRAD=0)\n");
    return;
  }
  auto shape = [](int64_t c, int64_t k, int64_t hw) {
    const Tensor x = RandomFloat({1, c, hw, hw}, 1), w = RandomFloat({k, c, 3, 3}, 2);
    WindowAttrs a;
    a.pads = {1, 1, 1, 1};
    ConvShape s;
    EXPECT_TRUE(ResolveConvShape(a, 1, x, w, nullptr, &s).ok());
    return s;
  };
  const Tensor w16 = RandomFloat({16, 16, 3, 3}, 3), w32 = RandomFloat({32, 32, 3, 3}, 4);
  for (cpu::SimdIsa isa : {cpu::SimdIsa::kAvx2, cpu::SimdIsa::kAvx512}) {
    if (static_cast<int>(cpu::CpuSimdIsa()) < static_cast<int>(isa)) {
      std::printf("[  SKIPPED ] %s kernels: this CPU lacks it\n", cpu::SimdIsaName(isa));
      continue;
    }
    SCOPED_TRACE(cpu::SimdIsaName(isa));
    const bool avx2 = isa == cpu::SimdIsa::kAvx2;
    cpu::WinogradConv c16(w16.data<float>(), nullptr, 16, 16, isa), c32(w32.data<float>(), nullptr, 32, 32, isa);
    EXPECT_EQ(c16.Preferred(shape(16, 16, 28)), avx2) << "16->16: transform-bound on AVX-512";
    EXPECT_TRUE(c32.Preferred(shape(32, 32, 14)));
    EXPECT_EQ(c32.Preferred(shape(32, 32, 7)), avx2) << "7x7: the tiles pad it to 8x8";
    EXPECT_TRUE(c32.Preferred(shape(32, 32, 20)));
    EXPECT_EQ(c32.Preferred(shape(32, 32, 8)), avx2) << "8x8: 16 tiles per image";
    EXPECT_TRUE(c32.Preferred(shape(32, 32, 12)));  // 36 tiles
  }
}

}  // namespace
}  // namespace whittle
