// ai.whittle BinaryMatMul and BinaryConv: the CPU kernels (sign panels + packed GEMM tiles for
// activations=float, XOR + popcount for activations=binary) against the reference on awkward
// shapes and conv geometries, every popcount path this CPU runs and the sign-panel decoders
// against plain loops, and hostile tensors refused at load with a clear message.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/binary_gemm.h"
#include "kernels/cpu/vmath.h"
#include "lib/ir/binary_format.h"
#include "lib/ops/op_def.h"
#include "tests/util/graph_builder.h"
#include "tests/util/test_util.h"
#include "whittle/session.h"

namespace whittle {
namespace {

using ::whittle::testing::ExpectBackendsMatchReference;
using ::whittle::testing::GraphBuilder;
using ::whittle::testing::MakeNode;
using ::whittle::testing::RandomFloat;
using ::whittle::testing::RandomSignBits;

AttributeMap MatMulAttrs(int64_t n, int64_t k, const std::string& act) {
  AttributeMap a;
  a.Set("out_features", Attribute::Int(n));
  a.Set("in_features", Attribute::Int(k));
  a.Set("activations", Attribute::String(act));
  return a;
}

TEST(BinaryMatMul, CpuMatchesReference) {
  RegisterAllOps();
  struct Case {
    int64_t m, n, k;
    bool bias;
  };
  const Case cases[] = {{1, 1, 1, false},   {1, 5, 63, true},   {64, 7, 64, true},  {3, 33, 65, false},
                        {64, 100, 130, true}, {2, 4, 5, true},  {7, 64, 1000, false}, {1, 130, 257, true},
                        {64, 17, 128, true}};
  uint32_t seed = 1;
  for (const std::string act : {"float", "binary"})
    for (const Case& c : cases) {
      SCOPED_TRACE(act + " m " + std::to_string(c.m) + " n " + std::to_string(c.n) + " k " + std::to_string(c.k));
      std::vector<Tensor> in{RandomFloat({c.m, c.k}, seed++), RandomSignBits(c.n, c.k, seed++),
                             RandomFloat({c.n}, seed++, 0.f, 1.f)};
      if (c.bias) in.push_back(RandomFloat({c.n}, seed++));
      const Node node = MakeNode("BinaryMatMul", static_cast<int>(in.size()), 1, MatMulAttrs(c.n, c.k, act), kWhittleDomain);
      for (int threads : {1, 2})
        for (bool consts : {false, true}) ExpectBackendsMatchReference(node, in, 1e-4f, 1e-4f, 17, threads, consts);
    }
  // A's leading dims are rows: [2, 3, K].
  std::vector<Tensor> in{RandomFloat({2, 3, 70}, 5), RandomSignBits(9, 70, 6), RandomFloat({9}, 7, 0.f, 1.f)};
  for (const std::string act : {"float", "binary"})
    ExpectBackendsMatchReference(MakeNode("BinaryMatMul", 3, 1, MatMulAttrs(9, 70, act), kWhittleDomain), in, 1e-4f,
                                 1e-4f, 17, 2, true);
}

TEST(BinaryMatMul, ReferenceComputesSignTimesAlpha) {
  RegisterAllOps();
  // W = [[+, -, +], [-, -, +]] (bits 0b101, 0b100), alpha = [0.5, 2], bias = [1, 0].
  Tensor bits = Tensor::FromVector<uint64_t>({2, 1}, {0b101u, 0b100u});
  const Tensor x = Tensor::FromVector<float>({1, 3}, {1.f, -2.f, 0.5f});
  std::vector<Tensor> in{x, bits, Tensor::FromVector<float>({2}, {0.5f, 2.f}), Tensor::FromVector<float>({2}, {1.f, 0.f})};
  auto y = ExpectBackendsMatchReference(MakeNode("BinaryMatMul", 4, 1, MatMulAttrs(2, 3, "float"), kWhittleDomain), in);
  ASSERT_EQ(y.size(), 1u);
  EXPECT_FLOAT_EQ(y[0].data<float>()[0], 0.5f * (1 + 2 + 0.5f) + 1);
  EXPECT_FLOAT_EQ(y[0].data<float>()[1], 2.f * (-1 + 2 + 0.5f));
  // Binary: sign(x) = [+, -, +], beta = 3.5 / 3; dots 3 and 1.
  y = ExpectBackendsMatchReference(MakeNode("BinaryMatMul", 4, 1, MatMulAttrs(2, 3, "binary"), kWhittleDomain), in);
  EXPECT_FLOAT_EQ(y[0].data<float>()[0], 3.5f / 3 * 0.5f * 3 + 1);
  EXPECT_FLOAT_EQ(y[0].data<float>()[1], 3.5f / 3 * 2.f * 1);
}

TEST(BinaryMatMul, EveryPopcountPathCounts) {
  std::mt19937_64 rng(3);
  for (int p = 0; p <= static_cast<int>(cpu::PopcountPath::kAvx512); ++p) {
    const auto path = static_cast<cpu::PopcountPath>(p);
    if (!cpu::CpuHasPopcountPath(path)) {
      std::printf("popcount path %s: not on this CPU\n", cpu::PopcountPathName(path));
      continue;
    }
    const cpu::XorPopcountFn fn = cpu::XorPopcountFor(path);
    for (int64_t words : {1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 130, 133}) {
      for (int64_t rows : {1, 2, 3}) {
        const int64_t n = 9, lda = words + 1, ldo = n + 2;
        std::vector<uint64_t> a(static_cast<size_t>(rows * lda)), w(static_cast<size_t>(n * words));
        for (auto& v : a) v = rng();
        for (auto& v : w) v = rng();
        w[0] = ~uint64_t{0};  // all ones against random bytes: every lookup entry
        std::vector<int32_t> out(static_cast<size_t>(rows * ldo), -1);
        fn(rows, a.data(), lda, w.data(), n, words, out.data(), ldo);
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t j = 0; j < n; ++j) {
            int want = 0;
            for (int64_t i = 0; i < words; ++i) want += __builtin_popcountll(a[r * lda + i] ^ w[j * words + i]);
            ASSERT_EQ(out[r * ldo + j], want) << cpu::PopcountPathName(path) << " words " << words << " row " << r
                                              << " col " << j;
          }
        EXPECT_EQ(out[ldo - 1], -1) << "wrote past n";
      }
    }
    // The sign packing of A's rows on this path: the same bits and sum |x| as the portable one.
    const cpu::PackSignsFn pack = cpu::PackSignsFor(path);
    for (int64_t k : {1, 5, 63, 64, 65, 130, 1000, 1024}) {
      Tensor x = RandomFloat({k}, static_cast<uint32_t>(k));
      x.data<float>()[0] = -0.f;  // sign(-0) = +1
      if (k > 2) x.data<float>()[k / 2] = 0.f;
      std::vector<uint64_t> got(static_cast<size_t>(BinaryWords(k)) + 1, 7), want(got.size(), 7);
      const double sg = pack(x.data<float>(), k, got.data()), sw = PackSigns(x.data<float>(), k, want.data());
      EXPECT_EQ(got, want) << cpu::PopcountPathName(path) << " k " << k;
      EXPECT_NEAR(sg, sw, 1e-4 * sw) << cpu::PopcountPathName(path) << " k " << k;
    }
  }
}

// The AVX-512 kernel on column-interleaved panels (one column per 64-bit lane): every row and
// column count, partial panels at the end, rows in 4-row tiles and single rows, nothing past n.
TEST(BinaryMatMul, ColumnPanelPopcountCounts) {
  if (!cpu::CpuHasPopcountPath(cpu::PopcountPath::kAvx512)) GTEST_SKIP() << "no AVX512_VPOPCNTDQ on this CPU";
  std::mt19937_64 rng(5);
  for (int64_t words : {1, 2, 7, 16, 17}) {
    for (int64_t n : {1, 8, 9, 16, 17, 33}) {
      for (int64_t rows : {1, 3, 4, 5, 9}) {
        const int64_t lda = words + 2, ldo = n + 3;
        std::vector<uint64_t> a(static_cast<size_t>(rows * lda)), w(static_cast<size_t>(n * words));
        for (auto& v : a) v = rng();
        for (auto& v : w) v = rng();
        const std::vector<uint64_t> panels = cpu::InterleaveColumns(w.data(), n, words);
        std::vector<int32_t> out(static_cast<size_t>(rows * ldo), -1);
        cpu::binary_avx512::XorPopcountPanels(rows, a.data(), lda, panels.data(), n, words, out.data(), ldo);
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t j = 0; j < n; ++j) {
            int want = 0;
            for (int64_t i = 0; i < words; ++i) want += __builtin_popcountll(a[r * lda + i] ^ w[j * words + i]);
            ASSERT_EQ(out[r * ldo + j], want) << "words " << words << " n " << n << " row " << r << " col " << j;
          }
          for (int64_t j = n; j < ldo; ++j) ASSERT_EQ(out[r * ldo + j], -1) << "wrote past n";
        }
      }
    }
  }
}

// The AVX2 kernel on nibble panels (32 columns per vector, 3-row x 3-panel tiles): every row and
// column count for rows 1..9 (whole tiles, 2-row and 1-row tails), n across partial panels and
// partial tiles, words 1..40 (past the 3-word byte flush), nothing written past n.
TEST(BinaryMatMul, NibblePanelPopcountCounts) {
  if (!cpu::CpuHasPopcountPath(cpu::PopcountPath::kAvx2)) GTEST_SKIP() << "no AVX2 on this CPU";
  std::mt19937_64 rng(7);
  for (int64_t words = 1; words <= 40; words += (words < 8 ? 1 : 5)) {
    for (int64_t n : {1, 31, 32, 33, 64, 95, 96, 97, 161, 200}) {
      for (int64_t rows = 1; rows <= 9; ++rows) {
        const int64_t lda = words + 1, ldo = n + 3;
        std::vector<uint64_t> a(static_cast<size_t>(rows * lda)), w(static_cast<size_t>(n * words));
        for (auto& v : a) v = rng();
        for (auto& v : w) v = rng();
        w[0] = ~uint64_t{0};  // all ones, and a row of zeros: the counts' extremes
        a[0] = ~uint64_t{0};
        if (rows > 1) a[lda] = 0;
        const std::vector<uint8_t> panels = cpu::NibbleColumns(w.data(), n, words);
        std::vector<int32_t> out(static_cast<size_t>(rows * ldo), -1);
        cpu::binary_avx2::XorPopcountNibbles(rows, a.data(), lda, panels.data(), n, words, out.data(), ldo);
        std::vector<int32_t> want(static_cast<size_t>(rows * ldo), -1);
        cpu::binary_portable::XorPopcount(rows, a.data(), lda, w.data(), n, words, want.data(), ldo);
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t j = 0; j < ldo; ++j)
            ASSERT_EQ(out[r * ldo + j], want[r * ldo + j]) << "words " << words << " n " << n << " rows " << rows
                                                           << " row " << r << " col " << j;
      }
    }
  }
  // Past one 16-bit chunk (1020 words): the counts move to 32 bits in between.
  const int64_t words = 1100, n = 40;
  std::vector<uint64_t> a(static_cast<size_t>(2 * words), ~uint64_t{0}), w(static_cast<size_t>(n * words), 0);
  const std::vector<uint8_t> panels = cpu::NibbleColumns(w.data(), n, words);
  std::vector<int32_t> out(static_cast<size_t>(2 * n));
  cpu::binary_avx2::XorPopcountNibbles(2, a.data(), words, panels.data(), n, words, out.data(), n);
  for (int32_t c : out) ASSERT_EQ(c, words * 64);
}

// The plain-loop check of the activations=float kernels' output y [rows, ldy]: y[r, j] =
// alpha[j] * sum_k (bit j%width of masks[(j/width)*K + k] ? x : -x) (+ bias[j]) (then max(., 0)),
// nothing written past n.
void ExpectSignGemm(const std::vector<float>& y, int64_t ldy, const std::vector<float>& a, int64_t lda,
                    const std::vector<uint32_t>& masks, int64_t width, int64_t rows, int64_t K, int64_t n,
                    const std::vector<float>& alpha, const std::vector<float>* bias, bool relu, const std::string& what) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < n; ++j) {
      double s = 0, mag = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double x = a[static_cast<size_t>(r * lda + k)];
        s += (masks[static_cast<size_t>((j / width) * K + k)] >> (j % width)) & 1 ? x : -x;
        mag += std::fabs(x);
      }
      double want = alpha[static_cast<size_t>(j)] * s + (bias ? (*bias)[static_cast<size_t>(j)] : 0.f);
      if (relu) want = std::max(want, 0.0);
      ASSERT_NEAR(y[static_cast<size_t>(r * ldy + j)], want, 1e-6 * mag + 1e-5)
          << "K " << K << " n " << n << " rows " << rows << " " << what << " r " << r << " j " << j;
    }
    for (int64_t j = n; j < ldy; ++j) ASSERT_EQ(y[static_cast<size_t>(r * ldy + j)], -7.f) << "wrote past n";
  }
}

// The AVX-512 activations=float kernel (masked adds from sign masks, 2 S - rowsum in the
// epilogue) against plain loops: rows 1..9 and 13 (6-, 3- and 1..5-row tiles), n across partial
// vectors, panels and 64/128-column tiles, K across the 512-input blocks, bias and relu on/off.
TEST(BinaryMatMul, SignMaskGemmMatchesPlainLoops) {
  if (!cpu::CpuHasPopcountPath(cpu::PopcountPath::kAvx512)) GTEST_SKIP() << "no AVX-512 on this CPU";
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (int64_t K : {1, 7, 511, 512, 513, 1100})
    for (int64_t n : {1, 16, 31, 33, 64, 100, 128, 129, 200})
      for (int64_t rows : {1, 2, 3, 4, 5, 6, 7, 8, 9, 13}) {
        const int64_t lda = K + 3, ldy = n + 5, panels = (n + 31) / 32;
        std::vector<float> a(static_cast<size_t>(rows * lda)), alpha(static_cast<size_t>(panels * 32), 0.f),
            bias(static_cast<size_t>(n)), rowsum(static_cast<size_t>(rows));
        for (auto& v : a) v = u(rng);
        for (int64_t j = 0; j < n; ++j) alpha[static_cast<size_t>(j)] = 0.5f + 0.5f * u(rng);
        for (auto& v : bias) v = u(rng);
        std::vector<uint32_t> masks(static_cast<size_t>(panels * K));
        for (auto& m : masks) m = static_cast<uint32_t>(rng());
        cpu::binary_avx512::SumRows(rows, a.data(), lda, K, rowsum.data());
        for (int variant = 0; variant < 4; ++variant) {
          const bool with_bias = variant & 1, relu = variant & 2;
          std::vector<float> y(static_cast<size_t>(rows * ldy), -7.f);
          cpu::binary_avx512::SignMaskGemm(rows, a.data(), lda, rowsum.data(), masks.data(), K, n, alpha.data(),
                                           with_bias ? bias.data() : nullptr, relu, y.data(), ldy);
          ASSERT_NO_FATAL_FAILURE(ExpectSignGemm(y, ldy, a, lda, masks, 32, rows, K, n, alpha, with_bias ? &bias : nullptr,
                                                 relu, "variant " + std::to_string(variant)));
        }
      }
}

// The AVX2 activations=float kernel for a few rows (x XOR the weights' sign bits, added) against
// plain loops: rows 1..5 (pairs and single rows), n across 16-column panels and 32/64-column
// tiles, bias and relu on/off.
TEST(BinaryMatMul, SignXorGemmMatchesPlainLoops) {
  if (!cpu::CpuHasPopcountPath(cpu::PopcountPath::kAvx2)) GTEST_SKIP() << "no AVX2 on this CPU";
  std::mt19937 rng(10);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (int64_t K : {1, 7, 300})
    for (int64_t n : {1, 15, 16, 17, 32, 50, 64, 65, 100, 128})
      for (int64_t rows = 1; rows <= 5; ++rows) {
        const int64_t lda = K + 3, ldy = n + 5, panels = (n + 15) / 16;
        std::vector<float> a(static_cast<size_t>(rows * lda)), alpha(static_cast<size_t>(panels * 16), 0.f),
            bias(static_cast<size_t>(n));
        for (auto& v : a) v = u(rng);
        for (int64_t j = 0; j < n; ++j) alpha[static_cast<size_t>(j)] = 0.5f + 0.5f * u(rng);
        for (auto& v : bias) v = u(rng);
        std::vector<uint32_t> masks(static_cast<size_t>(panels * K));
        for (auto& m : masks) m = static_cast<uint32_t>(rng()) & 0xffffu;
        for (int variant = 0; variant < 4; ++variant) {
          const bool with_bias = variant & 1, relu = variant & 2;
          std::vector<float> y(static_cast<size_t>(rows * ldy), -7.f);
          cpu::binary_avx2::SignXorGemm(rows, a.data(), lda, masks.data(), K, n, alpha.data(),
                                        with_bias ? bias.data() : nullptr, relu, y.data(), ldy);
          ASSERT_NO_FATAL_FAILURE(ExpectSignGemm(y, ldy, a, lda, masks, 16, rows, K, n, alpha, with_bias ? &bias : nullptr,
                                                 relu, "variant " + std::to_string(variant)));
        }
      }
}

TEST(BinaryMatMul, PerIsaSignDecodersSelectAlpha) {
  const cpu::SimdIsa isa = cpu::CpuSimdIsa();
  if (isa == cpu::SimdIsa::kScalar) GTEST_SKIP() << "no AVX2 on this CPU: the decoders are not used";
  for (int wide = 0; wide <= (isa == cpu::SimdIsa::kAvx512 ? 1 : 0); ++wide) {
    const int64_t nr = wide ? 32 : 16, K = 11;
    const Tensor alpha = RandomFloat({nr}, 8, 0.1f, 1.f);
    std::vector<uint32_t> masks(K);
    for (int64_t k = 0; k < K; ++k) masks[k] = static_cast<uint32_t>(0x9E3779B9u * (k + 1)) & (wide ? ~0u : 0xffffu);
    std::vector<float> out(static_cast<size_t>(K * nr), 0.f);
    (wide ? cpu::binary_avx512::DecodeSignPanel : cpu::binary_avx2::DecodeSignPanel)(masks.data(), K,
                                                                                      alpha.data<float>(), out.data());
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < nr; ++j) {
        const float a = alpha.data<float>()[j];
        ASSERT_EQ(out[k * nr + j], (masks[k] >> j) & 1 ? a : -a) << (wide ? "avx512" : "avx2") << " k " << k << " j " << j;
      }
  }
}

AttributeMap ConvAttrs(int64_t c, int64_t m, int64_t kh, int64_t kw, int64_t group, std::vector<int64_t> strides,
                       std::vector<int64_t> pads, std::vector<int64_t> dil, const std::string& act) {
  AttributeMap a;
  a.Set("in_channels", Attribute::Int(c));
  a.Set("out_channels", Attribute::Int(m));
  a.Set("kernel_shape", Attribute::Ints({kh, kw}));
  a.Set("group", Attribute::Int(group));
  if (!strides.empty()) a.Set("strides", Attribute::Ints(strides));
  if (!pads.empty()) a.Set("pads", Attribute::Ints(pads));
  if (!dil.empty()) a.Set("dilations", Attribute::Ints(dil));
  a.Set("activations", Attribute::String(act));
  return a;
}

TEST(BinaryConv, CpuMatchesReferenceOnConvGeometries) {
  RegisterAllOps();
  struct Case {
    const char* what;
    int64_t n, c, h, w, m, kh, kw, group;
    std::vector<int64_t> strides, pads, dil;
  };
  const std::vector<Case> cases = {
      {"3x3 pad 1", 2, 3, 7, 9, 4, 3, 3, 1, {}, {1, 1, 1, 1}, {}},
      {"stride 2 no pad", 1, 4, 9, 8, 5, 3, 3, 1, {2, 2}, {}, {}},
      {"asymmetric pads, 2x3 kernel", 1, 2, 6, 6, 3, 2, 3, 1, {1, 2}, {0, 2, 1, 0}, {}},
      {"dilation 2", 1, 3, 9, 9, 2, 3, 3, 1, {}, {2, 2, 2, 2}, {2, 2}},
      {"groups 2", 3, 4, 5, 5, 6, 3, 3, 2, {}, {1, 1, 1, 1}, {}},
      {"depthwise", 2, 5, 6, 7, 5, 3, 3, 5, {}, {1, 1, 1, 1}, {}},
      {"1x1", 1, 8, 4, 4, 33, 1, 1, 1, {}, {}, {}},
      {"K 144 (3 words), 32 channels", 1, 16, 6, 6, 32, 3, 3, 1, {}, {1, 1, 1, 1}, {}},
      {"K 576, stride 2 pad 1", 2, 64, 5, 5, 17, 3, 3, 1, {2, 2}, {1, 1, 1, 1}, {}},
      {"70 channels per group (chunks span words)", 1, 140, 4, 5, 6, 3, 2, 2, {}, {1, 0, 1, 1}, {}},
      {"65 channels, 1x1", 2, 65, 3, 3, 5, 1, 1, 1, {}, {}, {}},
  };
  uint32_t seed = 11;
  for (const std::string act : {"float", "binary"})
    for (const Case& c : cases) {
      SCOPED_TRACE(act + " " + c.what);
      const int64_t k = c.c / c.group * c.kh * c.kw;
      for (bool bias : {false, true}) {
        std::vector<Tensor> in{RandomFloat({c.n, c.c, c.h, c.w}, seed++), RandomSignBits(c.m, k, seed++),
                               RandomFloat({c.m}, seed++, 0.f, 1.f)};
        if (bias) in.push_back(RandomFloat({c.m}, seed++));
        const Node node = MakeNode("BinaryConv", static_cast<int>(in.size()), 1,
                                   ConvAttrs(c.c, c.m, c.kh, c.kw, c.group, c.strides, c.pads, c.dil, act), kWhittleDomain);
        for (int threads : {1, 2}) ExpectBackendsMatchReference(node, in, 1e-4f, 1e-4f, 17, threads, true);
        ExpectBackendsMatchReference(node, in, 1e-4f, 1e-4f, 17, 2, false);
      }
    }
}

// The Relu the runtime fuses into a binarized layer ("_activation", runtime/rewrite/
// fuse_activations.cc): the CPU kernels against the reference, and the reference's fused output
// against max(0, .) of its unfused one, both activation modes, with and without bias.
TEST(BinaryMatMul, FusedReluIsTheReluOfTheOutput) {
  RegisterAllOps();
  uint32_t seed = 60;
  for (const std::string act : {"float", "binary"})
    for (bool conv : {false, true})
      for (bool bias : {false, true}) {
        SCOPED_TRACE(act + (conv ? " conv" : " matmul") + (bias ? " bias" : ""));
        const int64_t n = conv ? 6 : 37, k = conv ? 4 * 9 : 131;
        std::vector<Tensor> in{conv ? RandomFloat({2, 4, 5, 6}, seed++) : RandomFloat({5, k}, seed++),
                               RandomSignBits(n, k, seed++), RandomFloat({n}, seed++, 0.f, 1.f)};
        if (bias) in.push_back(RandomFloat({n}, seed++));
        AttributeMap attrs = conv ? ConvAttrs(4, n, 3, 3, 1, {}, {1, 1, 1, 1}, {}, act) : MatMulAttrs(n, k, act);
        const int ni = static_cast<int>(in.size());
        const char* op = conv ? "BinaryConv" : "BinaryMatMul";
        const std::vector<Tensor> plain = ExpectBackendsMatchReference(MakeNode(op, ni, 1, attrs, kWhittleDomain), in,
                                                                       1e-4f, 1e-4f, 17, 1, true);
        attrs.Set("_activation", Attribute::String("Relu"));
        for (bool consts : {false, true}) {
          const std::vector<Tensor> fused = ExpectBackendsMatchReference(MakeNode(op, ni, 1, attrs, kWhittleDomain), in,
                                                                         1e-4f, 1e-4f, 17, 2, consts);
          ASSERT_EQ(fused.size(), 1u);
          int zeros = 0;
          for (int64_t i = 0; i < plain[0].numel(); ++i) {
            const float p = plain[0].data<float>()[i];
            zeros += p <= 0.f;
            ASSERT_EQ(fused[0].data<float>()[i], p > 0.f ? p : 0.f) << i;
          }
          EXPECT_GT(zeros, 0);
        }
      }
}

// A model with one BinaryMatMul over the given tensors (bias when defined).
StatusOr<std::unique_ptr<Session>> LoadOne(int64_t n, int64_t k, Tensor bits, Tensor alpha, Tensor bias,
                                           const std::string& act, Backend backend) {
  return ::whittle::testing::LoadWhittleOp("BinaryMatMul", k, {bits, alpha, bias}, MatMulAttrs(n, k, act), backend);
}

TEST(BinaryMatMul, HostileTensorsAreRefusedAtLoad) {
  RegisterAllOps();
  for (Backend be : {Backend::kReference, Backend::kCpu}) {
    SCOPED_TRACE(BackendName(be));
    auto expect_error = [&](StatusOr<std::unique_ptr<Session>> s, const std::string& what) {
      ASSERT_FALSE(s.ok()) << "loaded: " << what;
      EXPECT_NE(s.status().message().find(what), std::string::npos) << s.status().message();
    };
    const Tensor alpha = RandomFloat({3}, 1, 0.f, 1.f);
    ASSERT_TRUE(LoadOne(3, 70, RandomSignBits(3, 70, 2), alpha, RandomFloat({3}, 3), "binary", be).ok());
    // 70 inputs need 2 words per row.
    expect_error(LoadOne(3, 70, RandomSignBits(3, 64, 2), alpha, Tensor(), "float", be), "packed weight bits");
    expect_error(LoadOne(3, 70, RandomSignBits(2, 70, 2), alpha, Tensor(), "float", be), "packed weight bits");
    expect_error(LoadOne(3, 70, RandomFloat({3, 2}, 2), alpha, Tensor(), "float", be), "uint64");
    expect_error(LoadOne(3, 70, RandomSignBits(3, 70, 2), RandomFloat({4}, 1), Tensor(), "float", be), "alpha");
    expect_error(LoadOne(3, 70, RandomSignBits(3, 70, 2), alpha, RandomFloat({2}, 3), "float", be), "bias");
    expect_error(LoadOne(3, 70, RandomSignBits(3, 70, 2), alpha, Tensor(), "ternary", be), "activations");
    // A padding bit (input 70 of row 2) set.
    Tensor bits = RandomSignBits(3, 70, 2);
    bits.data<uint64_t>()[5] |= uint64_t{1} << 6;
    expect_error(LoadOne(3, 70, bits, alpha, Tensor(), "binary", be), "padding bits");
  }
}

TEST(BinaryConv, HostileTensorsAreRefusedAtLoad) {
  RegisterAllOps();
  auto load = [](AttributeMap attrs, Tensor bits, Tensor alpha) {
    Graph g = GraphBuilder(17)
                  .Input("x", DType::kFloat32, {Dim::Symbol("batch"), 4, 6, 6})
                  .Init("bits", bits)
                  .Init("alpha", alpha)
                  .Op("BinaryConv", {"x", "bits", "alpha"}, {"y"}, attrs)
                  .Output("y")
                  .Build();
    g.nodes().back().domain = kWhittleDomain;
    g.opset_imports[kWhittleDomain] = 1;
    return Session::FromGraph(std::move(g), SessionOptions{});
  };
  ASSERT_TRUE(load(ConvAttrs(4, 6, 3, 3, 2, {}, {}, {}, "binary"), RandomSignBits(6, 18, 1), RandomFloat({6}, 2)).ok());
  // 5x5 over 4 channels: 100 inputs, two words per channel.
  auto s = load(ConvAttrs(4, 6, 5, 5, 1, {}, {}, {}, "binary"), RandomSignBits(6, 18, 1), RandomFloat({6}, 2));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("[6, 2]"), std::string::npos) << s.status().message();
  s = load(ConvAttrs(4, 6, 3, 3, 3, {}, {}, {}, "binary"), RandomSignBits(6, 18, 1), RandomFloat({6}, 2));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("group"), std::string::npos) << s.status().message();
  s = load(ConvAttrs(4, 6, 3, 3, 2, {}, {}, {}, "float"), RandomSignBits(6, 18, 1), RandomFloat({5}, 2));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("alpha"), std::string::npos) << s.status().message();
  s = load(ConvAttrs(5, 6, 3, 3, 1, {}, {}, {}, "float"), RandomSignBits(6, 45, 1), RandomFloat({6}, 2));
  ASSERT_FALSE(s.ok());  // X has 4 channels
  EXPECT_NE(s.status().message().find("[N, 5, H, W]"), std::string::npos) << s.status().message();
}

}  // namespace
}  // namespace whittle
