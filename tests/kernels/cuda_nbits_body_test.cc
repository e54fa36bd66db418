// The CUDA MatMulNBits device code, run on the CPU: the bodies of kernels/cuda/nbits_body.h over
// every block, warp, lane and thread of the grids kernels/cuda/nbits.cu launches (the warp's
// shuffle sum done in the same butterfly order; the tiled kernel's phases one after the other for
// all 256 threads, as __syncthreads orders them), against MatMulNBitsReference on awkward shapes:
// K not a multiple of the block or of 8, N odd, few and many rows, packed, float and default zero
// points, bias, a fused Relu. It checks arithmetic and indexing, not that the kernels run on a GPU
// (tests/kernels/nbits_test.cc does that where there is one, and CudaNBitsDevice below on
// decoder-sized shapes).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/common/nbits.h"
#include "kernels/cuda/nbits_body.h"
#include "kernels/reference/nbits.h"
#include "lib/ir/domain.h"
#include "lib/ops/op_def.h"
#include "runtime/node_runner.h"
#include "tests/util/test_util.h"

namespace whittle::cuda {
namespace {

using ::whittle::testing::MakeNode;
using ::whittle::testing::RandomFloat;
using ::whittle::testing::TensorsClose;
using ::whittle::testing::TestedBackends;

enum class Zp { kNone, kPacked, kFloat };

Tensor RandomBytes(const Dims& d, uint32_t seed) {
  std::mt19937 rng(seed);
  Tensor t(DType::kUInt8, d);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<uint8_t>()[i] = static_cast<uint8_t>(rng());
  return t;
}

// GemvKernel on the CPU: each warp's 32 lanes, then __shfl_xor_sync's butterfly (every lane
// adds the partner's value of the round before), lane 0 storing.
void EmulateGemv(const NBitsArgs& g) {
  for (int64_t bx = 0; bx < (g.N + kNBitsWarps - 1) / kNBitsWarps; ++bx)
    for (int64_t by = 0; by < (g.M + kNBitsRows - 1) / kNBitsRows; ++by)
      for (int warp = 0; warp < kNBitsWarps; ++warp) {
        const int64_t n = bx * kNBitsWarps + warp, m0 = by * kNBitsRows;
        if (n >= g.N) continue;
        float acc[kNBitsLanes][kNBitsRows] = {};
        for (int lane = 0; lane < kNBitsLanes; ++lane) NBitsLaneDot(g, n, m0, lane, acc[lane]);
        for (int r = 0; r < kNBitsRows; ++r)
          for (int off = kNBitsLanes / 2; off > 0; off /= 2) {
            float next[kNBitsLanes];
            for (int l = 0; l < kNBitsLanes; ++l) next[l] = acc[l][r] + acc[l ^ off][r];
            for (int l = 0; l < kNBitsLanes; ++l) acc[l][r] = next[l];
          }
        for (int r = 0; r < kNBitsRows && m0 + r < g.M; ++r) NBitsStore(g, m0 + r, n, acc[0][r]);
      }
}

// TileKernel on the CPU: per block, the load of all threads, then their products, per K step.
void EmulateTiles(const NBitsArgs& g) {
  auto s = std::make_unique<NBitsTileSmem>();
  std::vector<float> acc(static_cast<size_t>(kNBitsThreads) * 16);
  auto cell = [&](int tid) { return reinterpret_cast<float(*)[4]>(&acc[static_cast<size_t>(tid) * 16]); };
  for (int64_t m0 = 0; m0 < g.M; m0 += kNBitsTileM)
    for (int64_t n0 = 0; n0 < g.N; n0 += kNBitsTileN) {
      std::fill(acc.begin(), acc.end(), 0.f);
      for (int64_t k0 = 0; k0 < g.K; k0 += kNBitsTileK) {
        for (int tid = 0; tid < kNBitsThreads; ++tid) NBitsTileLoad(g, m0, n0, k0, tid, *s);
        for (int tid = 0; tid < kNBitsThreads; ++tid) NBitsTileMac(*s, tid, cell(tid));
      }
      for (int tid = 0; tid < kNBitsThreads; ++tid) NBitsTileStore(g, m0, n0, tid, cell(tid));
    }
}

void Case(int64_t M, int64_t N, int64_t K, int64_t block, Zp zp, bool bias, bool relu, uint32_t seed) {
  SCOPED_TRACE("M=" + std::to_string(M) + " N=" + std::to_string(N) + " K=" + std::to_string(K) +
               " block=" + std::to_string(block) + " zp=" + std::to_string(static_cast<int>(zp)) +
               (bias ? " bias" : "") + (relu ? " relu" : ""));
  NBitsAttrs at;
  at.K = K;
  at.N = N;
  at.block = block;
  const Tensor A = RandomFloat({M, K}, seed);
  const Tensor B = RandomBytes({N, at.blocks(), at.blob()}, seed + 1);
  const Tensor scales = RandomFloat({N * at.blocks()}, seed + 2, 0.01f, 0.1f);
  Tensor zpt;
  if (zp == Zp::kPacked) zpt = RandomBytes({N * at.zp_row_bytes()}, seed + 3);
  if (zp == Zp::kFloat) zpt = RandomFloat({N * at.blocks()}, seed + 3, 0.f, 15.f);
  const Tensor bt = RandomFloat({N}, seed + 4);
  auto w = CheckNBitsOperands(at, B, scales, zp == Zp::kNone ? nullptr : &zpt, nullptr, bias ? &bt : nullptr);
  ASSERT_TRUE(w.ok()) << w.status().message();
  Tensor want(DType::kFloat32, {M, N});
  ASSERT_TRUE(MatMulNBitsReference(at, *w, A, &want).ok());
  if (relu)
    for (int64_t i = 0; i < want.numel(); ++i) want.data<float>()[i] = std::max(want.data<float>()[i], 0.f);

  NBitsArgs g;
  g.a = A.data<float>();
  g.b = w->b;
  g.scales = w->scales;
  g.zp_packed = w->zp_packed;
  g.zp_float = w->zp_float;
  g.bias = w->bias;
  g.M = M;
  g.N = N;
  g.K = K;
  g.block = block;
  g.relu = relu;
  ASSERT_EQ(g.row_bytes(), at.row_bytes());
  ASSERT_EQ(g.zp_row_bytes(), at.zp_row_bytes());
  for (bool gemv : {true, false}) {
    SCOPED_TRACE(gemv ? "gemv" : "tiles");
    Tensor got(DType::kFloat32, {M, N});
    std::fill(got.data<float>(), got.data<float>() + got.numel(), std::nanf(""));
    g.y = got.data<float>();
    gemv ? EmulateGemv(g) : EmulateTiles(g);
    for (int64_t i = 0; i < want.numel(); ++i) {
      const float x = want.data<float>()[i], y = got.data<float>()[i];
      ASSERT_NEAR(y, x, 1e-4f * (1.f + std::fabs(x))) << "at " << i / N << ", " << i % N;
    }
  }
}

TEST(CudaNBitsBody, MatchesReferenceOnAwkwardShapes) {
  uint32_t seed = 1;
  for (int64_t block : {16, 32, 64, 128})
    for (int64_t K : {16, 37, 100, 257})
      for (Zp zp : {Zp::kNone, Zp::kPacked, Zp::kFloat}) {
        Case(1, 5, K, block, zp, false, false, seed += 7);
        Case(3, 1, K, block, zp, true, false, seed += 7);
        Case(7, 67, K, block, zp, zp != Zp::kFloat, false, seed += 7);
      }
}

TEST(CudaNBitsBody, ManyRowsAcrossTiles) {
  // Rows and columns past one 64 x 64 tile, K past several 32-wide steps and not a multiple of 8.
  Case(70, 131, 203, 32, Zp::kPacked, true, false, 11);
  Case(9, 64, 512, 128, Zp::kFloat, true, false, 12);
  Case(65, 3, 45, 16, Zp::kNone, false, false, 13);
}

TEST(CudaNBitsBody, FusedRelu) { Case(5, 33, 96, 32, Zp::kPacked, true, true, 21); }

TEST(CudaNBitsBody, FewRowsTakeTheWarpPerColumnPath) {
  EXPECT_TRUE(NBitsUseGemv(1));
  EXPECT_TRUE(NBitsUseGemv(kNBitsGemvMaxRows));
  EXPECT_FALSE(NBitsUseGemv(kNBitsGemvMaxRows + 1));
}

TEST(CudaNBitsBody, ZeroPointsFromPackedBytes) {
  // Two blocks per byte, low nibble first, as MatMulNBits packs them; 8 without any.
  const uint8_t zp[2] = {0x3a, 0x05};
  NBitsArgs g;
  g.K = 48;
  g.block = 16;  // 3 blocks: zp_row_bytes 2
  g.zp_packed = zp;
  EXPECT_EQ(g.zp_row_bytes(), 2);
  EXPECT_EQ(NBitsZeroPoint(g, 0, 0), 10.f);
  EXPECT_EQ(NBitsZeroPoint(g, 0, 1), 3.f);
  EXPECT_EQ(NBitsZeroPoint(g, 0, 2), 5.f);
  g.zp_packed = nullptr;
  EXPECT_EQ(NBitsZeroPoint(g, 0, 1), 8.f);
  const uint8_t word[4] = {0x21, 0x43, 0x65, 0x87};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(NBitsNibble(NBitsWord(word), i), static_cast<float>(i + 1));
}

// On a GPU (only there): decoder-sized shapes through the CUDA kernel (constant weights, as
// models carry them) against the reference: K of 4096 and 21 rows over the warp path, a prefill
// of 40 rows over the tiles. tests/kernels/nbits_test.cc runs the small awkward shapes on every backend.
TEST(CudaNBitsDevice, DecoderShapesMatchReference) {
  const auto& tested = TestedBackends();
  if (std::find(tested.begin(), tested.end(), Backend::kCuda) == tested.end()) {
    std::printf("[ NO DEVICE ] CudaNBitsDevice: no CUDA backend with a GPU here; the device kernels are unchecked\n");
    return;
  }
  RegisterAllOps();
  struct Shape {
    int64_t m, k, n, block;
  };
  uint32_t seed = 100;
  for (const Shape& c :
       {Shape{1, 4096, 520, 32}, Shape{3, 4096, 129, 128}, Shape{21, 600, 96, 16}, Shape{40, 1000, 200, 64}}) {
    SCOPED_TRACE("m " + std::to_string(c.m) + " k " + std::to_string(c.k) + " n " + std::to_string(c.n));
    const int64_t nb = (c.k + c.block - 1) / c.block;
    AttributeMap at;
    at.Set("K", Attribute::Int(c.k));
    at.Set("N", Attribute::Int(c.n));
    at.Set("bits", Attribute::Int(4));
    at.Set("block_size", Attribute::Int(c.block));
    std::vector<Tensor> in{RandomFloat({c.m, c.k}, seed++), RandomBytes({c.n, nb, c.block / 2}, seed++),
                           RandomFloat({c.n * nb}, seed++, 0.01f, 0.1f), RandomBytes({c.n * ((nb + 1) / 2)}, seed++)};
    const Node node = MakeNode("MatMulNBits", 4, 1, at, kMicrosoftDomain);
    auto want = RunNode(node, 17, in, Backend::kReference, 1, true);
    auto got = RunNode(node, 17, in, Backend::kCuda, 2, true);
    ASSERT_TRUE(want.ok()) << want.status().message();
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_TRUE(TensorsClose((*got)[0], (*want)[0], 1e-3f, 1e-4f));
  }
}

}  // namespace
}  // namespace whittle::cuda
