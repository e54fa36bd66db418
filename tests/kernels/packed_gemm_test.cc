// The packed-weight GEMM (kernels/cpu/packed_gemm.h) on each tile ISA this CPU runs, against a
// double-precision product over row counts 1-19 (every tile height and the short last block),
// column counts around the panel widths and the 4-panel groups, both weight layouts, bias and
// Relu; and the Gemm/MatMul kernels pinned to the packed path against the reference kernels.
#include "kernels/cpu/packed_gemm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "tests/util/test_util.h"

namespace whittle {
namespace {

using testing::ExpectBackendsMatchReference;
using testing::MakeNode;
using testing::RandomFloat;

TEST(PackedGemm, MatchesDoubleProductOnEveryIsa) {
  int isas_run = 0;
  for (cpu::SimdIsa isa : {cpu::SimdIsa::kAvx2, cpu::SimdIsa::kAvx512}) {
    if (static_cast<int>(isa) > static_cast<int>(cpu::ActiveSimdIsa())) continue;
    ++isas_run;
    SCOPED_TRACE(cpu::SimdIsaName(isa));
    uint32_t seed = 3;
    for (int64_t M : {1, 2, 3, 5, 6, 7, 8, 9, 13, 19}) {
      for (int64_t N : {1, 10, 16, 17, 32, 33, 100, 129, 200}) {
        for (int64_t K : {1, 7, 64}) {
          for (bool trans : {false, true}) {
            const bool with_bias = (M + N) % 2 == 0, relu = (M + K) % 2 == 1;
            SCOPED_TRACE("M=" + std::to_string(M) + " N=" + std::to_string(N) + " K=" + std::to_string(K) +
                         (trans ? " trans" : "") + (with_bias ? " bias" : "") + (relu ? " relu" : ""));
            // A with a row stride wider than K, C with one wider than N: strides are honoured.
            const Tensor a = RandomFloat({M, K + 3}, seed++), b = RandomFloat(trans ? Dims{N, K} : Dims{K, N}, seed++);
            const Tensor bias = RandomFloat({N}, seed++);
            const cpu::PackedGemmB packed(b.data<float>(), trans, K, N, isa);
            ASSERT_TRUE(packed.Valid());
            ASSERT_EQ(packed.isa(), isa);
            const int64_t ldc = N + 5;
            for (int threads : {1, 2}) {
              std::vector<float> c(static_cast<size_t>(M * ldc), -7.f);
              packed.Multiply(M, a.data<float>(), K + 3, c.data(), ldc, with_bias ? bias.data<float>() : nullptr,
                              relu, threads);
              for (int64_t i = 0; i < M; ++i) {
                for (int64_t j = 0; j < N; ++j) {
                  double want = with_bias ? bias.data<float>()[j] : 0.0;
                  for (int64_t k = 0; k < K; ++k)
                    want += static_cast<double>(a.data<float>()[i * (K + 3) + k]) *
                            (trans ? b.data<float>()[j * K + k] : b.data<float>()[k * N + j]);
                  if (relu) want = std::max(want, 0.0);
                  ASSERT_NEAR(c[static_cast<size_t>(i * ldc + j)], want, 1e-4 + 1e-5 * std::fabs(want))
                      << "row " << i << " col " << j << " threads " << threads;
                }
                for (int64_t j = N; j < ldc; ++j)
                  ASSERT_EQ(c[static_cast<size_t>(i * ldc + j)], -7.f) << "wrote past column " << N;
              }
            }
          }
        }
      }
    }
  }
  if (isas_run == 0) GTEST_SKIP() << "this CPU has neither AVX2 nor AVX-512";
}

TEST(PackedGemm, ScalarIsaHasNoPackedPath) {
  const Tensor b = RandomFloat({4, 3}, 1);
  EXPECT_FALSE(cpu::PackedGemmB(b.data<float>(), false, 4, 3, cpu::SimdIsa::kScalar).Valid());
}

// Gemm (row biases of each shape, a full C, fused activations) and MatMul (2-D and batched A)
// with constant weights, the packed path pinned, then Sgemm's pinned: both match the reference.
TEST(PackedGemm, GemmAndMatMulKernelsOnBothPaths) {
  for (cpu::PackedGemmUse use : {cpu::PackedGemmUse::kAlways, cpu::PackedGemmUse::kNever}) {
    cpu::SetPackedGemmUse(use);
    SCOPED_TRACE(use == cpu::PackedGemmUse::kAlways ? "packed" : "sgemm");
    uint32_t seed = 11;
    const int64_t M = 9, N = 37, K = 20;
    for (const Dims& cd : std::vector<Dims>{{N}, {1}, {1, N}, {M, N}, {M, 1}}) {
      for (const char* act : {"", "Relu", "Tanh"}) {
        for (int tb : {0, 1}) {
          SCOPED_TRACE("C " + DimsToString(cd) + " act " + act + " transB " + std::to_string(tb));
          AttributeMap attrs;
          attrs.Set("transB", Attribute::Int(tb));
          attrs.Set("beta", Attribute::Float(-1.5f));
          if (*act) attrs.Set("_activation", Attribute::String(act));
          const std::vector<Tensor> in = {RandomFloat({M, K}, seed++), RandomFloat(tb ? Dims{N, K} : Dims{K, N}, seed++),
                                          RandomFloat(cd, seed++)};
          for (int threads : {1, 2})
            ExpectBackendsMatchReference(MakeNode("Gemm", 3, 1, attrs), in, 1e-4f, 1e-4f, 17, threads, true);
        }
      }
    }
    for (const Dims& ad : std::vector<Dims>{{1, 48}, {64, 48}, {3, 5, 48}}) {
      for (const char* act : {"", "Relu"}) {
        AttributeMap attrs;
        if (*act) attrs.Set("_activation", Attribute::String(act));
        const std::vector<Tensor> in = {RandomFloat(ad, seed++), RandomFloat({48, 70}, seed++)};
        ExpectBackendsMatchReference(MakeNode("MatMul", 2, 1, attrs), in, 1e-4f, 1e-4f, 17, 2, true);
      }
    }
  }
  cpu::SetPackedGemmUse(cpu::PackedGemmUse::kAuto);
}

}  // namespace
}  // namespace whittle
