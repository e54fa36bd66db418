// The direct stride-1 convolution (kernels/cpu/conv_direct.h) on each tile ISA this CPU runs,
// against the reference convolution plus bias, residual and activation.
#include "kernels/cpu/conv_direct.h"

#include <gtest/gtest.h>

#include <cmath>

#include "kernels/reference/conv.h"
#include "tests/util/test_util.h"

namespace whittle {
namespace {

using testing::RandomFloat;

struct DirectCase {
  const char* name;
  Dims x, w;
  int64_t group;
  std::vector<int64_t> pads, dilations;
};

std::vector<DirectCase> Cases() {
  return {
      {"resnet_block_3x3", {1, 16, 28, 28}, {16, 16, 3, 3}, 1, {1, 1, 1, 1}, {}},
      {"stem_one_channel", {2, 1, 28, 28}, {16, 1, 3, 3}, 1, {1, 1, 1, 1}, {}},
      {"channels_not_a_block_multiple", {3, 5, 9, 11}, {10, 5, 3, 3}, 1, {1, 1, 1, 1}, {}},
      {"asymmetric_pads_5x5", {1, 3, 13, 7}, {6, 3, 5, 5}, 1, {2, 0, 1, 3}, {}},
      {"dilated", {2, 4, 12, 12}, {7, 4, 3, 3}, 1, {2, 2, 2, 2}, {2, 2}},
      {"groups", {2, 6, 10, 10}, {9, 2, 3, 3}, 3, {1, 1, 1, 1}, {}},
      {"pointwise", {1, 32, 7, 7}, {24, 32, 1, 1}, 1, {0, 0, 0, 0}, {}},
      {"narrow_no_pad", {4, 2, 6, 3}, {3, 2, 3, 3}, 1, {0, 0, 0, 0}, {}},
      {"kernel_wider_than_input", {1, 2, 4, 2}, {5, 2, 3, 5}, 1, {1, 2, 1, 2}, {}},
  };
}

TEST(DirectConv, MatchesReferenceOnEveryIsa) {
  uint32_t seed = 7;
  int isas_run = 0;
  for (cpu::SimdIsa isa : {cpu::SimdIsa::kAvx2, cpu::SimdIsa::kAvx512}) {
    if (static_cast<int>(cpu::CpuSimdIsa()) < static_cast<int>(isa)) {
      std::printf("[  SKIPPED ] %s tile: this CPU lacks it\n", cpu::SimdIsaName(isa));
      continue;
    }
    ++isas_run;
    SCOPED_TRACE(cpu::SimdIsaName(isa));
    for (const DirectCase& c : Cases()) {
      SCOPED_TRACE(c.name);
      const Tensor x = RandomFloat(c.x, seed++), w = RandomFloat(c.w, seed++), b = RandomFloat({c.w[0]}, seed++);
      WindowAttrs a;
      a.pads = c.pads;
      a.dilations = c.dilations;
      ConvShape s;
      ASSERT_TRUE(ResolveConvShape(a, c.group, x, w, &b, &s).ok());
      const Dims ydims{c.x[0], c.w[0], s.geo.out[0], s.geo.out[1]};
      const Tensor sum = RandomFloat(ydims, seed++);
      Tensor ref(DType::kFloat32, ydims);
      ConvReference<float>(s, x.data<float>(), w.data<float>(), b.data<float>(), ref.data<float>());
      cpu::DirectConv conv(w.data<float>(), c.w[0], c.w[1], c.w[2], c.w[3], c.group, isa);
      ASSERT_TRUE(conv.Applies(s));
      FusedActivation relu;
      relu.kind = FusedActivation::kRelu;
      for (int threads : {1, 2}) {
        for (bool with_sum : {false, true}) {
          SCOPED_TRACE(std::string(with_sum ? "sum+relu" : "plain") + " threads=" + std::to_string(threads));
          Tensor y(DType::kFloat32, ydims);
          // Poison: every output element must be written.
          for (int64_t i = 0; i < y.numel(); ++i) y.data<float>()[i] = std::nanf("");
          conv.Run(s, x.data<float>(), b.data<float>(), with_sum ? sum.data<float>() : nullptr,
                   with_sum ? relu : FusedActivation(), threads, y.data<float>());
          for (int64_t i = 0; i < y.numel(); ++i) {
            float e = ref.data<float>()[i];
            if (with_sum) e = std::max(e + sum.data<float>()[i], 0.f);
            ASSERT_NEAR(y.data<float>()[i], e, 1e-4f + 1e-4f * std::fabs(e)) << "element " << i;
          }
        }
      }
    }
  }
  if (isas_run == 0) std::printf("[  SKIPPED ] no AVX2 or AVX-512 on this CPU: the direct path never runs here\n");
}

TEST(DirectConv, RefusesWhatItDoesNotHandle) {
  const Tensor x = RandomFloat({1, 4, 9, 9}, 1), w = RandomFloat({4, 4, 3, 3}, 2);
  cpu::DirectConv conv(w.data<float>(), 4, 4, 3, 3, 1);
  WindowAttrs strided;
  strided.strides = {2, 2};
  ConvShape s;
  ASSERT_TRUE(ResolveConvShape(strided, 1, x, w, nullptr, &s).ok());
  EXPECT_FALSE(conv.Applies(s));
  // Another weight geometry than the one packed.
  const Tensor w5 = RandomFloat({4, 4, 5, 5}, 3);
  ASSERT_TRUE(ResolveConvShape(WindowAttrs(), 1, x, w5, nullptr, &s).ok());
  EXPECT_FALSE(conv.Applies(s));
}

}  // namespace
}  // namespace whittle
