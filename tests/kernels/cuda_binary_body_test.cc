// The CUDA binarized and codebook layers' device code, run on the CPU: the bodies of
// kernels/cuda/binary_body.h over every block and thread of the grids the CUDA kernels launch
// (RunBLinear / RunBConv over BEmulatedLaunches, the host code the CUDA factory runs), against
// the reference ops. The XNOR counts are integers and the sign bits exact, so the only difference
// the tolerance allows for is float rounding (beta and the epilogue; the decoding tile's sums).
// It checks arithmetic, indexing, the padding mask, grouping, chunking and slicing on any
// machine, not that the kernels run on a GPU (the binary and codebook kernel tests do that where
// there is one: TestedBackends()).
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/binary_body.h"
#include "kernels/reference/binary.h"
#include "lib/ir/binary_format.h"
#include "lib/ir/codebook_format.h"
#include "lib/ops/op_def.h"
#include "runtime/node_runner.h"
#include "tests/util/test_util.h"

namespace whittle::cuda {
namespace {

using ::whittle::testing::MakeNode;
using ::whittle::testing::RandomFloat;
using ::whittle::testing::RandomSignBits;
using ::whittle::testing::TensorsClose;

Tensor Reference(const std::string& op, const std::vector<Tensor>& in, const AttributeMap& attrs) {
  RegisterAllOps();
  auto r = RunNode(MakeNode(op, static_cast<int>(in.size()), 1, attrs, kWhittleDomain), 17, in, Backend::kReference, 1,
                   true);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? (*r)[0] : Tensor();
}

const float* Opt(const std::vector<Tensor>& in, size_t i) { return in.size() > i ? in[i].data<float>() : nullptr; }

void BinaryMatMulCase(int64_t m, int64_t n, int64_t k, bool binary, bool bias, bool relu, uint32_t seed,
                      int64_t slice = kBMaxGridYZ * kBTileM) {
  SCOPED_TRACE(std::string(binary ? "binary" : "float") + " m=" + std::to_string(m) + " n=" + std::to_string(n) +
               " k=" + std::to_string(k) + " slice=" + std::to_string(slice));
  std::vector<Tensor> in{RandomFloat({m, k}, seed), RandomSignBits(n, k, seed + 1), RandomFloat({n}, seed + 2, 0.f, 1.f)};
  if (bias) in.push_back(RandomFloat({n}, seed + 3));
  AttributeMap a;
  a.Set("out_features", Attribute::Int(n));
  a.Set("in_features", Attribute::Int(k));
  a.Set("activations", Attribute::String(binary ? "binary" : "float"));
  if (relu) a.Set("_activation", Attribute::String("Relu"));
  const Tensor want = Reference("BinaryMatMul", in, a);
  BLinear l;
  l.N = n;
  l.K = k;
  l.binary = binary;
  l.relu = relu;
  l.signs = in[1].data<uint64_t>();
  l.alpha = in[2].data<float>();
  l.bias = Opt(in, 3);
  const int64_t rows = std::min(m, slice);
  std::vector<uint64_t> abits(static_cast<size_t>(rows * BinaryWords(k)));
  std::vector<float> beta(static_cast<size_t>(rows));
  Tensor got(DType::kFloat32, {m, n});
  BEmulatedLaunches L;
  RunBLinear(L, l, in[0].data<float>(), m, got.data<float>(), abits.data(), beta.data(), slice);
  EXPECT_TRUE(TensorsClose(got, want, 1e-4f, 1e-4f));
}

TEST(CudaBinaryBodies, BinaryMatMulTilesMatchReference) {
  // Shapes across the 64x64 tile and the 8-word (512-bit) step: K not a multiple of 64, of 512.
  const int64_t shapes[][3] = {{1, 1, 1}, {3, 5, 63}, {64, 64, 64}, {65, 70, 65}, {7, 129, 600}, {130, 17, 1100}};
  uint32_t seed = 1;
  for (const auto& s : shapes)
    for (bool binary : {false, true}) {
      BinaryMatMulCase(s[0], s[1], s[2], binary, seed % 2 == 0, seed % 3 == 0, seed);
      seed += 10;
    }
  // Calls past the grid's row limit go in slices (here of 64 and 50 rows), beta sliced with them.
  for (int64_t slice : {int64_t{64}, int64_t{50}})
    for (bool binary : {false, true}) BinaryMatMulCase(150, 33, 100, binary, true, false, seed += 10, slice);
}

TEST(CudaBinaryBodies, CodebookMatMulDecodingTileMatchesReference) {
  uint32_t seed = 300;
  const int64_t shapes[][3] = {{1, 1, 1}, {5, 7, 3}, {70, 65, 33}, {9, 130, 100}};
  for (int64_t bits : {4, 8})
    for (const auto& s : shapes) {
      const int64_t m = s[0], n = s[1], k = s[2], entries = bits == 4 ? 11 : 200;
      SCOPED_TRACE("bits=" + std::to_string(bits) + " m=" + std::to_string(m) + " n=" + std::to_string(n) +
                   " k=" + std::to_string(k));
      std::mt19937 rng(seed++);
      Tensor idx(DType::kUInt8, {PackedIndexBytes(n * k, bits)});
      for (int64_t e = 0; e < n * k; ++e) {
        const uint8_t v = static_cast<uint8_t>(rng() % entries);
        if (bits == 8) idx.data<uint8_t>()[e] = v;
        else idx.data<uint8_t>()[e / 2] |= static_cast<uint8_t>(v << ((e % 2) * 4));
      }
      std::vector<Tensor> in{RandomFloat({m, k}, seed++), RandomFloat({entries}, seed++), idx,
                             RandomFloat({n}, seed++)};
      AttributeMap a;
      a.Set("bits", Attribute::Int(bits));
      a.Set("out_features", Attribute::Int(n));
      a.Set("in_features", Attribute::Int(k));
      const Tensor want = Reference("CodebookMatMul", in, a);
      BLinear l;
      l.N = n;
      l.K = k;
      l.decode = bits == 4 ? BDecode::kCodebook4 : BDecode::kCodebook8;
      l.codebook = in[1].data<float>();
      l.index = idx.data<uint8_t>();
      l.bias = in[3].data<float>();
      Tensor got(DType::kFloat32, {m, n});
      BEmulatedLaunches L;
      RunBLinear(L, l, in[0].data<float>(), m, got.data<float>(), nullptr, nullptr);
      EXPECT_TRUE(TensorsClose(got, want, 1e-4f, 1e-4f));
    }
}

struct ConvCase {
  const char* what;
  int64_t n, c, h, w, m, kh, kw, group;
  std::vector<int64_t> strides, pads, dil;
};

void BinaryConvCase(const ConvCase& c, bool binary, bool bias, bool relu, int64_t chunk, uint32_t seed) {
  SCOPED_TRACE(std::string(binary ? "binary " : "float ") + c.what + " chunk=" + std::to_string(chunk));
  BinaryConvAttrs a;
  a.in_channels = c.c;
  a.group = c.group;
  a.window.kernel_shape = {c.kh, c.kw};
  a.window.strides = c.strides;
  a.window.pads = c.pads;
  a.window.dilations = c.dil;
  a.b.n = c.m;
  a.b.k = c.c / c.group * c.kh * c.kw;
  a.b.binary = binary;
  a.b.relu = relu;
  std::vector<Tensor> in{RandomFloat({c.n, c.c, c.h, c.w}, seed), RandomSignBits(c.m, a.b.k, seed + 1),
                         RandomFloat({c.m}, seed + 2, 0.f, 1.f)};
  if (bias) in.push_back(RandomFloat({c.m}, seed + 3));
  AttributeMap attrs;
  attrs.Set("in_channels", Attribute::Int(c.c));
  attrs.Set("out_channels", Attribute::Int(c.m));
  attrs.Set("kernel_shape", Attribute::Ints({c.kh, c.kw}));
  attrs.Set("group", Attribute::Int(c.group));
  if (!c.strides.empty()) attrs.Set("strides", Attribute::Ints(c.strides));
  if (!c.pads.empty()) attrs.Set("pads", Attribute::Ints(c.pads));
  if (!c.dil.empty()) attrs.Set("dilations", Attribute::Ints(c.dil));
  attrs.Set("activations", Attribute::String(binary ? "binary" : "float"));
  if (relu) attrs.Set("_activation", Attribute::String("Relu"));
  const Tensor want = Reference("BinaryConv", in, attrs);
  ConvShape s;
  ASSERT_TRUE(ResolveBinaryConv(a, in[0], &s).ok());
  BConv conv;
  conv.g = BConvGeometryOf(s, a.b.k);
  conv.M = c.m;
  conv.binary = binary;
  conv.relu = relu;
  conv.signs = in[1].data<uint64_t>();
  conv.alpha = in[2].data<float>();
  conv.bias = Opt(in, 3);
  std::vector<uint64_t> scratch(static_cast<size_t>(BConvScratchBytes(conv, chunk, c.n) / 8 + 1));
  Tensor got(DType::kFloat32, want.dims());
  BEmulatedLaunches L;
  RunBConv(L, conv, in[0].data<float>(), c.n, chunk, got.data<float>(), scratch.data());
  EXPECT_TRUE(TensorsClose(got, want, 1e-4f, 1e-4f));
}

TEST(CudaBinaryBodies, BinaryConvMatchesReferenceOnConvGeometries) {
  const std::vector<ConvCase> cases = {
      {"3x3 pad 1", 3, 3, 7, 9, 4, 3, 3, 1, {}, {1, 1, 1, 1}, {}},
      {"stride 2 no pad", 1, 4, 9, 8, 5, 3, 3, 1, {2, 2}, {}, {}},
      {"asymmetric pads, 2x3 kernel", 1, 2, 6, 6, 3, 2, 3, 1, {1, 2}, {0, 2, 1, 0}, {}},
      {"dilation 2", 2, 3, 9, 9, 2, 3, 3, 1, {}, {2, 2, 2, 2}, {2, 2}},
      {"groups 2", 3, 4, 5, 5, 6, 3, 3, 2, {}, {1, 1, 1, 1}, {}},
      {"depthwise", 2, 5, 6, 7, 5, 3, 3, 5, {}, {1, 1, 1, 1}, {}},
      {"1x1, M past a tile", 1, 8, 4, 4, 70, 1, 1, 1, {}, {}, {}},
      {"K 576 (9 words: two steps), stride 2 pad 1", 2, 64, 5, 5, 17, 3, 3, 1, {2, 2}, {1, 1, 1, 1}, {}},
      {"P past a tile (81 positions)", 1, 3, 9, 9, 4, 3, 3, 1, {}, {1, 1, 1, 1}, {}},
  };
  uint32_t seed = 500;
  for (bool binary : {false, true})
    for (const ConvCase& c : cases) {
      BinaryConvCase(c, binary, seed % 2 == 0, seed % 3 != 0, /*chunk=*/2, seed);
      seed += 10;
    }
}

}  // namespace
}  // namespace whittle::cuda
