// Blocked 4-bit weights: com.microsoft MatMulNBits (the CPU kernel, which reads the codes in place,
// against the reference on awkward shapes: K not a multiple of the block, N not a multiple of the
// row unroll, few and many rows of A, packed and float zero points, bias), DequantizeLinear 21
// with int4/uint4 and block_size (against values worked out by hand from the ONNX definition),
// and the runtime's DequantizeLinear -> MatMul fusion equal to the two ops run as ONNX defines them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "kernels/common/int4.h"
#include "kernels/cpu/isa/features.h"
#include "lib/ir/domain.h"
#include "lib/ops/op_def.h"
#include "runtime/node_runner.h"
#include "runtime/rewrite/fuse_nbits.h"
#include "tests/util/graph_builder.h"
#include "tests/util/test_util.h"
#include "whittle/session.h"

namespace whittle {
namespace {

using ::whittle::testing::ExpectBackendsMatchReference;
using ::whittle::testing::GraphBuilder;
using ::whittle::testing::MakeNode;
using ::whittle::testing::RandomFloat;

Tensor RandomBytes(const Dims& d, uint32_t seed) {
  std::mt19937 rng(seed);
  Tensor t(DType::kUInt8, d);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<uint8_t>()[i] = static_cast<uint8_t>(rng());
  return t;
}

Tensor PositiveScales(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.01f, 0.1f);
  Tensor t(DType::kFloat32, {n});
  for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = u(rng);
  return t;
}

AttributeMap NBitsAttrsMap(int64_t K, int64_t N, int64_t block) {
  AttributeMap a;
  a.Set("K", Attribute::Int(K));
  a.Set("N", Attribute::Int(N));
  a.Set("bits", Attribute::Int(4));
  a.Set("block_size", Attribute::Int(block));
  return a;
}

TEST(MatMulNBits, CpuMatchesReference) {
  RegisterAllOps();
  struct Case {
    int64_t m, k, n, block;
    int zp;  // 0 none, 1 packed uint8, 2 float
    bool bias;
  };
  const Case cases[] = {{1, 64, 8, 32, 0, false},   {1, 100, 13, 32, 1, true}, {3, 17, 5, 16, 2, false},
                        {4, 256, 67, 64, 1, false}, {5, 96, 33, 32, 0, true},  {9, 130, 70, 128, 1, true},
                        {1, 2048, 37, 32, 0, false}, {2, 33, 4, 16, 1, true}};
  uint32_t seed = 1;
  for (const Case& c : cases) {
    SCOPED_TRACE("m " + std::to_string(c.m) + " k " + std::to_string(c.k) + " n " + std::to_string(c.n) + " block " +
                 std::to_string(c.block) + " zp " + std::to_string(c.zp));
    const int64_t nb = (c.k + c.block - 1) / c.block;
    std::vector<Tensor> in{RandomFloat({c.m, c.k}, seed++), RandomBytes({c.n, nb, c.block / 2}, seed++),
                           PositiveScales(c.n * nb, seed++)};
    in.push_back(c.zp == 1 ? RandomBytes({c.n * ((nb + 1) / 2)}, seed++)
                           : c.zp == 2 ? RandomFloat({c.n * nb}, seed++) : Tensor());
    if (c.bias) {
      in.push_back(Tensor());
      in.push_back(RandomFloat({c.n}, seed++));
    }
    const Node node = MakeNode("MatMulNBits", static_cast<int>(in.size()), 1, NBitsAttrsMap(c.k, c.n, c.block),
                               kMicrosoftDomain);
    for (bool consts : {false, true}) ExpectBackendsMatchReference(node, in, 1e-4f, 1e-4f, 17, 2, consts);
  }
}

// accuracy_level 4 on a CPU with AVX512-VNNI: each row of A quantized to int8 per block (scale
// max|a| / 127, round half to even), then the codes multiply the int8 values exactly. Checked
// against that definition computed here in double (what the kernel must equal up to float
// rounding), and against the float reference within what int8 activations cost (each activation
// moves at most half its block's step: |error| <= sum_k |w_k| sa_j / 2). Without VNNI (or
// under WHITTLE_ISA=avx2) the level is a hint the CPU kernel ignores: float arithmetic, equal to
// the reference.
// *bound gets each output's worst int8 rounding error against float activations.
std::vector<double> Int8ActivationProduct(const Tensor& A, const Tensor& b, const Tensor& scales, const Tensor* zp,
                                          const Tensor* bias, int64_t K, int64_t N, int64_t block,
                                          std::vector<double>* bound) {
  const int64_t M = A.numel() / K, nb = (K + block - 1) / block, rb = nb * block / 2;
  std::vector<double> y(static_cast<size_t>(M * N), 0.0);
  bound->assign(static_cast<size_t>(M * N), 0.0);
  for (int64_t m = 0; m < M; ++m) {
    const float* a = A.data<float>() + m * K;
    for (int64_t j = 0; j < nb; ++j) {
      const int64_t k0 = j * block, k1 = std::min(K, k0 + block);
      float amax = 0.f;
      for (int64_t k = k0; k < k1; ++k) amax = std::max(amax, std::fabs(a[k]));
      const float inv = amax > 0.f ? 127.f / amax : 0.f, sa = amax / 127.f;
      std::vector<int64_t> q;
      for (int64_t k = k0; k < k1; ++k) q.push_back(static_cast<int64_t>(std::nearbyint(a[k] * inv)));
      for (int64_t n = 0; n < N; ++n) {
        const uint8_t* row = b.data<uint8_t>() + n * rb;
        const double z = zp ? (zp->dtype() == DType::kFloat32 ? zp->data<float>()[n * nb + j]
                                                             : int4::UInt4At(zp->data<uint8_t>() + n * ((nb + 1) / 2), j))
                            : 8.0;
        double dot = 0, wabs = 0;
        for (int64_t k = k0; k < k1; ++k) {
          dot += static_cast<double>(q[static_cast<size_t>(k - k0)]) * (int4::UInt4At(row, k) - z);
          wabs += std::fabs(int4::UInt4At(row, k) - z);
        }
        const double sw = scales.data<float>()[n * nb + j];
        y[static_cast<size_t>(m * N + n)] += sw * sa * dot;
        (*bound)[static_cast<size_t>(m * N + n)] += sw * wabs * sa / 2;
      }
    }
    if (bias)
      for (int64_t n = 0; n < N; ++n) y[static_cast<size_t>(m * N + n)] += bias->data<float>()[n];
  }
  return y;
}

TEST(MatMulNBits, AccuracyLevel4QuantizesActivationsPerBlock) {
  RegisterAllOps();
  const bool int8 = cpu::CpuFeatures().Avx512() && cpu::CpuFeatures().avx512vnni;
  std::printf("accuracy_level 4 runs %s on this CPU\n", int8 ? "int8 activations (AVX512-VNNI)" : "in float (no VNNI)");
  struct Case {
    int64_t m, k, n, block;
    int zp;  // 0 none, 1 packed uint8, 2 float
    bool bias;
  };
  // Blocks of 16 to 256 (a 64-byte chunk of codes spans 8 blocks down to half of one), K not a
  // multiple of the block or of 128, a partial last chunk, 1 to 9 rows of A, N past the unroll.
  const Case cases[] = {{1, 64, 8, 32, 0, false},    {1, 100, 13, 32, 1, true},   {3, 17, 5, 16, 2, false},
                        {4, 256, 67, 64, 1, false},  {5, 96, 33, 32, 0, true},    {9, 130, 70, 128, 1, true},
                        {1, 2048, 37, 32, 1, false}, {2, 33, 4, 16, 1, true},     {1, 1000, 9, 256, 2, false},
                        {1, 4096, 64, 128, 0, false}, {7, 300, 21, 64, 2, true},  {32, 160, 11, 16, 1, false}};
  uint32_t seed = 100;
  for (const Case& c : cases) {
    SCOPED_TRACE("m " + std::to_string(c.m) + " k " + std::to_string(c.k) + " n " + std::to_string(c.n) + " block " +
                 std::to_string(c.block) + " zp " + std::to_string(c.zp));
    const int64_t nb = (c.k + c.block - 1) / c.block;
    Tensor A = RandomFloat({c.m, c.k}, seed++);
    // Activations as decoders have them: a few channels far larger than the rest.
    for (int64_t i = 0; i < A.numel(); i += 37) A.data<float>()[i] *= 20.f;
    std::vector<Tensor> in{A, RandomBytes({c.n, nb, c.block / 2}, seed++), PositiveScales(c.n * nb, seed++)};
    in.push_back(c.zp == 1 ? RandomBytes({c.n * ((nb + 1) / 2)}, seed++)
                           : c.zp == 2 ? RandomFloat({c.n * nb}, seed++, 0.f, 15.f) : Tensor());
    if (c.bias) {
      in.push_back(Tensor());
      in.push_back(RandomFloat({c.n}, seed++));
    }
    AttributeMap attrs = NBitsAttrsMap(c.k, c.n, c.block);
    attrs.Set("accuracy_level", Attribute::Int(4));
    const Node node = MakeNode("MatMulNBits", static_cast<int>(in.size()), 1, attrs, kMicrosoftDomain);
    auto ref = RunNode(node, 17, in, Backend::kReference, 1, true);
    ASSERT_TRUE(ref.ok()) << ref.status().message();
    for (int threads : {1, 2}) {
      auto y = RunNode(node, 17, in, Backend::kCpu, threads, true);
      ASSERT_TRUE(y.ok()) << y.status().message();
      std::vector<double> bound;
      const std::vector<double> want = Int8ActivationProduct(A, in[1], in[2], c.zp ? &in[3] : nullptr,
                                                             c.bias ? &in[5] : nullptr, c.k, c.n, c.block, &bound);
      double scale = 0, err_def = 0, err_ref = 0, past_bound = 0;
      for (int64_t i = 0; i < c.m * c.n; ++i) scale = std::max(scale, std::fabs((*ref)[0].data<float>()[i]) + 0.0);
      for (int64_t i = 0; i < c.m * c.n; ++i) {
        const double got = (*y)[0].data<float>()[i], e = std::fabs(got - (*ref)[0].data<float>()[i]);
        err_def = std::max(err_def, std::fabs(got - want[static_cast<size_t>(i)]));
        err_ref = std::max(err_ref, e);
        past_bound = std::max(past_bound, e - bound[static_cast<size_t>(i)]);
      }
      if (int8) {
        EXPECT_LE(err_def, 2e-5 * scale) << "threads " << threads;        // the definition, to float rounding
        EXPECT_LE(past_bound, 1e-4 * scale) << "threads " << threads;     // within int8 rounding of float
        EXPECT_GT(err_ref, 10 * err_def) << "threads " << threads;        // and not the float path
      } else {
        EXPECT_LE(err_ref, 1e-4 * scale) << "threads " << threads;
      }
    }
  }
}

// The reference against the definition, one element worked out by hand: K 20, block 16, two
// blocks; row 1's codes all 3 in block 0 and 12 in block 1, zero points 1 and 9 (packed), scales
// 0.5 and 0.25: W[1, k] = (3 - 1) * 0.5 = 1 for k < 16, (12 - 9) * 0.25 = 0.75 after.
TEST(MatMulNBits, ReferenceFollowsTheDefinition) {
  RegisterAllOps();
  const int64_t K = 20, N = 2, block = 16, nb = 2;
  Tensor b(DType::kUInt8, {N, nb, block / 2});
  for (int64_t i = 0; i < b.numel(); ++i) b.data<uint8_t>()[i] = 0;
  uint8_t* row1 = b.data<uint8_t>() + nb * block / 2;
  for (int64_t k = 0; k < 16; ++k) int4::Set4(row1, k, 3);
  for (int64_t k = 16; k < 20; ++k) int4::Set4(row1, k, 12);
  Tensor scales = Tensor::FromVector<float>({N * nb}, {1.f, 1.f, 0.5f, 0.25f});
  Tensor zp(DType::kUInt8, {N * 1});
  zp.data<uint8_t>()[0] = 0x00;
  zp.data<uint8_t>()[1] = 0x91;  // row 1: block 0 -> 1 (low nibble), block 1 -> 9
  std::vector<float> a(static_cast<size_t>(K));
  for (int64_t k = 0; k < K; ++k) a[static_cast<size_t>(k)] = static_cast<float>(k + 1);
  Tensor A = Tensor::FromVector<float>({1, K}, a);
  const Node node = MakeNode("MatMulNBits", 4, 1, NBitsAttrsMap(K, N, block), kMicrosoftDomain);
  for (Backend be : {Backend::kReference, Backend::kCpu}) {
    auto y = RunNode(node, 17, {A, b, scales, zp}, be, 1);
    ASSERT_TRUE(y.ok()) << y.status().message();
    // sum_{k<16} (k+1) * 1 + sum_{16<=k<20} (k+1) * 0.75 = 136 + 0.75 * 74
    EXPECT_FLOAT_EQ((*y)[0].data<float>()[1], 136.f + 0.75f * 74.f) << BackendName(be);
    // Row 0: codes 0, zero points 0, scale 1: 0.
    EXPECT_FLOAT_EQ((*y)[0].data<float>()[0], 0.f) << BackendName(be);
  }
}

TEST(MatMulNBits, HostileOperandsAreRefused) {
  RegisterAllOps();
  const Node node = MakeNode("MatMulNBits", 3, 1, NBitsAttrsMap(64, 4, 32), kMicrosoftDomain);
  // B one block short.
  auto r = RunNode(node, 17, {RandomFloat({1, 64}, 1), RandomBytes({4, 1, 16}, 2), PositiveScales(8, 3)},
                   Backend::kCpu, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("B has shape"), std::string::npos) << r.status().message();
  // A block size that is not a power of two.
  const Node odd = MakeNode("MatMulNBits", 3, 1, NBitsAttrsMap(64, 4, 24), kMicrosoftDomain);
  r = RunNode(odd, 17, {RandomFloat({1, 64}, 1), RandomBytes({4, 3, 12}, 2), PositiveScales(12, 3)}, Backend::kCpu, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("power of two"), std::string::npos) << r.status().message();
}

// Packed int4 [K, N] from signed values.
Tensor PackInt4(const std::vector<int>& v, const Dims& d, DType dt) {
  Tensor t(dt, d);
  auto* p = static_cast<uint8_t*>(t.raw_data());
  for (size_t i = 0; i < t.nbytes(); ++i) p[i] = 0;
  for (size_t i = 0; i < v.size(); ++i) int4::Set4(p, static_cast<int64_t>(i), v[i]);
  return t;
}

// DequantizeLinear 21 on int4 with block_size 2 along axis 0: y[k, n] = (x - zp[k/2, n]) * s[k/2, n].
TEST(DequantizeLinearBlocked, Int4AndUInt4FollowTheDefinition) {
  RegisterAllOps();
  AttributeMap at;
  at.Set("axis", Attribute::Int(0));
  at.Set("block_size", Attribute::Int(2));
  const Node node = MakeNode("DequantizeLinear", 3, 1, at);
  // x [3, 2] int4: rows (-8, 7), (1, -1), (5, 0); blocks: rows 0-1, row 2.
  const Tensor x = PackInt4({-8, 7, 1, -1, 5, 0}, {3, 2}, DType::kInt4);
  const Tensor s = Tensor::FromVector<float>({2, 2}, {0.5f, 2.f, 1.f, 4.f});
  const Tensor zp = PackInt4({1, -1, 0, 2}, {2, 2}, DType::kInt4);
  for (Backend be : {Backend::kReference, Backend::kCpu}) {
    auto y = RunNode(node, 21, {x, s, zp}, be, 1);
    ASSERT_TRUE(y.ok()) << y.status().message();
    const std::vector<float> want{(-8 - 1) * 0.5f, (7 + 1) * 2.f, (1 - 1) * 0.5f, (-1 + 1) * 2.f, 5 * 1.f, (0 - 2) * 4.f};
    for (size_t i = 0; i < want.size(); ++i) EXPECT_FLOAT_EQ((*y)[0].data<float>()[i], want[i]) << i;
  }
  // uint4 without a zero point, odd element count (the last byte's high nibble unused).
  const Tensor xu = PackInt4({15, 0, 9}, {3, 1}, DType::kUInt4);
  auto y = RunNode(node, 21, {xu, Tensor::FromVector<float>({2, 1}, {1.f, 0.5f})}, Backend::kReference, 1);
  ASSERT_TRUE(y.ok()) << y.status().message();
  EXPECT_FLOAT_EQ((*y)[0].data<float>()[0], 15.f);
  EXPECT_FLOAT_EQ((*y)[0].data<float>()[2], 4.5f);
  // A scale whose blocked shape does not fit is refused with the node named.
  auto bad = RunNode(node, 21, {x, Tensor::FromVector<float>({3, 2}, {1, 1, 1, 1, 1, 1}), zp}, Backend::kReference, 1);
  ASSERT_FALSE(bad.ok());
  // int4 needs opset 21.
  auto old = RunNode(MakeNode("DequantizeLinear", 2, 1), 19, {x, Tensor::Scalar<float>(1.f)}, Backend::kReference, 1);
  ASSERT_FALSE(old.ok());
  EXPECT_NE(old.status().message().find("opset 21"), std::string::npos) << old.status().message();
}

// Per-tensor int4: every element takes the one scale and zero point (once, only element 0 was
// written); a [1] zero point goes with a scalar scale, as the onnx package's int4 case has it.
TEST(DequantizeLinearBlocked, Int4PerTensorCoversEveryElement) {
  RegisterAllOps();
  AttributeMap at;
  at.Set("axis", Attribute::Int(0));
  const Node node = MakeNode("DequantizeLinear", 3, 1, at);
  const Tensor x = PackInt4({0, 1, 7, -4, -8}, {5}, DType::kInt4);
  const Tensor zp = PackInt4({1}, {1}, DType::kInt4);
  for (Backend be : {Backend::kReference, Backend::kCpu}) {
    auto y = RunNode(node, 25, {x, Tensor::Scalar<float>(2.f), zp}, be, 1);
    ASSERT_TRUE(y.ok()) << y.status().message();
    const std::vector<float> want{-2.f, 0.f, 12.f, -10.f, -18.f};
    for (size_t i = 0; i < want.size(); ++i) EXPECT_FLOAT_EQ((*y)[0].data<float>()[i], want[i]) << i;
  }
}

// x -> MatMul(x, DequantizeLinear(W int4|uint4 [K, N], blocked)) with and without zero points:
// the optimized session (MatMulNBits) equals the unoptimized one (the two ops as ONNX defines them).
TEST(FuseNBits, DequantizeMatMulRunsAsMatMulNBits) {
  RegisterAllOps();
  for (DType dt : {DType::kInt4, DType::kUInt4})
    for (bool with_zp : {false, true})
      for (int64_t K : {64, 70}) {
        SCOPED_TRACE(std::string(DTypeName(dt)) + (with_zp ? " with" : " without") + " zero point, K " +
                     std::to_string(K));
        const int64_t N = 9, block = 32, nb = (K + block - 1) / block;
        std::mt19937 rng(static_cast<uint32_t>(K + with_zp));
        std::vector<int> w(static_cast<size_t>(K * N)), z(static_cast<size_t>(nb * N));
        for (int& v : w) v = dt == DType::kInt4 ? static_cast<int>(rng() % 16) - 8 : static_cast<int>(rng() % 16);
        for (int& v : z) v = dt == DType::kInt4 ? static_cast<int>(rng() % 16) - 8 : static_cast<int>(rng() % 16);
        GraphBuilder b(21);
        b.Input("x", DType::kFloat32, {Dim::Symbol("batch"), K});
        b.Init("w", PackInt4(w, {K, N}, dt)).Init("s", PositiveScales(nb * N, 5).Reshaped({nb, N}));
        std::vector<std::string> dq_in{"w", "s"};
        if (with_zp) {
          b.Init("z", PackInt4(z, {nb, N}, dt));
          dq_in.push_back("z");
        }
        AttributeMap at;
        at.Set("axis", Attribute::Int(0));
        at.Set("block_size", Attribute::Int(block));
        b.Op("DequantizeLinear", dq_in, {"wf"}, at).Op("MatMul", {"x", "wf"}, {"y"}).Output("y");
        Graph g = b.Build();
        Graph fused = g;
        int count = 0;
        ASSERT_TRUE(FuseNBits(fused, &count).ok());
        EXPECT_EQ(count, 1);
        int nbits = 0;
        for (const Node& n : fused.nodes()) nbits += n.op_type == "MatMulNBits";
        EXPECT_EQ(nbits, 1);
        for (int64_t rows : {1, 6})
          ::whittle::testing::ExpectOptimizedMatchesUnoptimized(g, {{"x", RandomFloat({rows, K}, 9)}});
      }
}

}  // namespace
}  // namespace whittle
