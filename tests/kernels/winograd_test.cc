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

struct WinoCase {
  const char* name;
  Dims x;
  int64_t k;
  std::vector<int64_t> pads;
  int64_t block;  // 0: NHWC
};

std::vector<WinoCase> Cases() {
  return {
      {"resnet_16_28x28", {2, 16, 28, 28}, 16, {1, 1, 1, 1}, 8},
      {"resnet_32_14x14", {3, 32, 14, 14}, 32, {1, 1, 1, 1}, 8},
      {"odd_output_tiles", {1, 8, 9, 7}, 16, {1, 1, 1, 1}, 8},
      {"no_padding", {2, 16, 6, 5}, 8, {0, 0, 0, 0}, 8},
      {"asymmetric_pads", {1, 8, 5, 6}, 24, {0, 1, 2, 0}, 8},
      {"one_pixel", {1, 8, 1, 1}, 8, {1, 1, 1, 1}, 8},
      {"wide_pads", {1, 8, 3, 4}, 8, {2, 2, 2, 2}, 8},
      {"block16", {2, 32, 10, 11}, 16, {1, 1, 1, 1}, 16},
      {"nhwc", {2, 16, 7, 8}, 24, {1, 1, 1, 1}, 0},
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

TEST(Winograd, MatchesReferenceOnBlockedLayouts) {
  if (!cpu::WinogradConv::Enabled()) {
    std::printf("[  SKIPPED ] no AVX2 + FMA on this CPU (or WHITTLE_WINOGRAD=0): the Winograd path never runs\n");
    return;
  }
  uint32_t seed = 11;
  FusedActivation none, relu, leaky;
  relu.kind = FusedActivation::kRelu;
  leaky.kind = FusedActivation::kLeakyRelu;
  leaky.alpha = 0.1f;
  for (const WinoCase& c : Cases()) {
    SCOPED_TRACE(c.name);
    const Dims wd{c.k, c.x[1], 3, 3};
    const Tensor x = RandomFloat(c.x, seed++), w = RandomFloat(wd, seed++), b = RandomFloat({c.k}, seed++);
    WindowAttrs a;
    a.pads = c.pads;
    ConvShape s;
    ASSERT_TRUE(ResolveConvShape(a, 1, x, w, &b, &s).ok());
    const Dims ydims{c.x[0], c.k, s.geo.out[0], s.geo.out[1]};
    const Tensor sum = RandomFloat(ydims, seed++);
    Tensor ref(DType::kFloat32, ydims), mag(DType::kFloat32, ydims);
    ConvReference<float>(s, x.data<float>(), w.data<float>(), b.data<float>(), ref.data<float>());
    // sum |w| |x| per output: what the rounding error scales with.
    ConvReference<float>(s, Abs(x).data<float>(), Abs(w).data<float>(), nullptr, mag.data<float>());
    const Tensor xb = Blocked(x, c.block), sumb = Blocked(sum, c.block);
    cpu::WinogradConv conv(w.data<float>(), b.data<float>(), c.k, c.x[1]);
    ASSERT_TRUE(conv.Applies(s, c.block));
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
      const Tensor wantb = Blocked(want, c.block), magb = Blocked(mag, c.block), refb = Blocked(ref, c.block);
      Tensor first;
      for (int threads : {1, 2}) {
        SCOPED_TRACE("threads=" + std::to_string(threads));
        Tensor y(DType::kFloat32, wantb.dims());
        for (int64_t i = 0; i < y.numel(); ++i) y.data<float>()[i] = std::nanf("");  // all written?
        conv.Run(s, c.block, xb.data<float>(), with_sum ? sumb.data<float>() : nullptr, act, threads,
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

TEST(Winograd, RefusesWhatItDoesNotHandle) {
  if (!cpu::WinogradConv::Enabled()) {
    std::printf("[  SKIPPED ] no AVX2 + FMA on this CPU (or WHITTLE_WINOGRAD=0)\n");
    return;
  }
  const Tensor x = RandomFloat({1, 16, 9, 9}, 1), w = RandomFloat({16, 16, 3, 3}, 2);
  cpu::WinogradConv conv(w.data<float>(), nullptr, 16, 16);
  ConvShape s;
  ASSERT_TRUE(ResolveConvShape(WindowAttrs(), 1, x, w, nullptr, &s).ok());
  EXPECT_TRUE(conv.Applies(s, 8));
  EXPECT_FALSE(conv.Applies(s, 4)) << "a block that is not a multiple of 8";
  EXPECT_FALSE(conv.Applies(s, 32)) << "a block that does not divide the channels";
  WindowAttrs strided;
  strided.strides = {2, 2};
  ASSERT_TRUE(ResolveConvShape(strided, 1, x, w, nullptr, &s).ok());
  EXPECT_FALSE(conv.Applies(s, 8));
  WindowAttrs dilated;
  dilated.dilations = {2, 2};
  ASSERT_TRUE(ResolveConvShape(dilated, 1, x, w, nullptr, &s).ok());
  EXPECT_FALSE(conv.Applies(s, 8));
  const Tensor x12 = RandomFloat({1, 12, 9, 9}, 3), w12 = RandomFloat({16, 12, 3, 3}, 4);
  cpu::WinogradConv conv12(w12.data<float>(), nullptr, 16, 12);
  ASSERT_TRUE(ResolveConvShape(WindowAttrs(), 1, x12, w12, nullptr, &s).ok());
  EXPECT_FALSE(conv12.Applies(s, 0)) << "NHWC with 12 input channels";
}

}  // namespace
}  // namespace whittle
