// ai.whittle CodebookMatMul: the CPU kernel (panel-order indices, vectorized decode, packed GEMM
// tiles) against the reference on awkward shapes, the per-ISA decoders against a plain lookup,
// and hostile inputs refused at load with a clear message.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/codebook_decode.h"
#include "kernels/cpu/vmath.h"
#include "lib/ir/codebook_format.h"
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

// Packed indices for n x k weights with entries < ncb.
Tensor RandomIndices(int64_t n, int64_t k, int64_t bits, int64_t ncb, uint32_t seed) {
  std::mt19937 rng(seed);
  Tensor t(DType::kUInt8, {PackedIndexBytes(n * k, bits)});
  uint8_t* p = t.data<uint8_t>();
  std::fill(p, p + t.numel(), uint8_t{0});
  for (int64_t e = 0; e < n * k; ++e) {
    const uint8_t v = static_cast<uint8_t>(rng() % static_cast<uint32_t>(ncb));
    if (bits == 8) p[e] = v;
    else p[e >> 1] = static_cast<uint8_t>(p[e >> 1] | (v << ((e & 1) * 4)));
  }
  return t;
}

AttributeMap Attrs(int64_t bits, int64_t n, int64_t k) {
  AttributeMap a;
  a.Set("bits", Attribute::Int(bits));
  a.Set("out_features", Attribute::Int(n));
  a.Set("in_features", Attribute::Int(k));
  return a;
}

TEST(CodebookMatMul, CpuMatchesReference) {
  RegisterAllOps();
  struct Case {
    int64_t m, n, k, bits, ncb;
    bool bias;
  };
  const Case cases[] = {{1, 1, 1, 4, 1, false},   {1, 10, 128, 4, 16, true}, {5, 15, 3, 4, 7, true},
                        {7, 16, 17, 8, 17, false}, {64, 33, 64, 4, 16, true}, {64, 130, 31, 8, 200, true},
                        {3, 100, 9, 8, 256, false}, {13, 257, 5, 4, 2, true}};
  uint32_t seed = 1;
  for (const Case& c : cases) {
    SCOPED_TRACE("m " + std::to_string(c.m) + " n " + std::to_string(c.n) + " k " + std::to_string(c.k) + " bits " +
                 std::to_string(c.bits) + " codebook " + std::to_string(c.ncb));
    std::vector<Tensor> in{RandomFloat({c.m, c.k}, seed++), RandomFloat({c.ncb}, seed++),
                           RandomIndices(c.n, c.k, c.bits, c.ncb, seed++)};
    if (c.bias) in.push_back(RandomFloat({c.n}, seed++));
    const Node node = MakeNode("CodebookMatMul", static_cast<int>(in.size()), 1, Attrs(c.bits, c.n, c.k), kWhittleDomain);
    for (bool consts : {false, true}) ExpectBackendsMatchReference(node, in, 1e-4f, 1e-4f, 17, 2, consts);
  }
}

TEST(CodebookMatMul, PerIsaDecodersLookUpEveryEntry) {
  const cpu::SimdIsa isa = cpu::CpuSimdIsa();
  if (isa == cpu::SimdIsa::kScalar) GTEST_SKIP() << "no AVX2 on this CPU: the decoders are not used";
  for (int64_t ncb : {1, 5, 16, 17, 256}) {
    SCOPED_TRACE("codebook " + std::to_string(ncb));
    const Tensor cb = RandomFloat({ncb}, 7);
    for (int wide = 0; wide <= (isa == cpu::SimdIsa::kAvx512 ? 1 : 0); ++wide) {
      const int64_t nr = wide ? 32 : 16, K = 9;
      std::vector<uint8_t> idx(static_cast<size_t>(K * nr));
      for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<uint8_t>((i * 37 + 11) % static_cast<size_t>(ncb));
      std::vector<float> out(idx.size(), -1.f);
      (wide ? cpu::codebook_avx512::DecodePanel : cpu::codebook_avx2::DecodePanel)(idx.data(), K, cb.data<float>(), ncb,
                                                                                    out.data());
      for (size_t i = 0; i < idx.size(); ++i) ASSERT_EQ(out[i], cb.data<float>()[idx[i]]) << (wide ? "avx512" : "avx2") << " [" << i << "]";
    }
  }
}

// A model with one CodebookMatMul whose codebook/indices/bias are the given tensors.
StatusOr<std::unique_ptr<Session>> LoadOne(int64_t bits, int64_t n, int64_t k, Tensor cb, Tensor idx, Tensor bias,
                                           Backend backend) {
  return ::whittle::testing::LoadWhittleOp("CodebookMatMul", k, {cb, idx, bias}, Attrs(bits, n, k), backend);
}

TEST(CodebookMatMul, HostileTensorsAreRefusedAtLoad) {
  RegisterAllOps();
  for (Backend be : {Backend::kReference, Backend::kCpu}) {
    SCOPED_TRACE(BackendName(be));
    auto expect_error = [&](StatusOr<std::unique_ptr<Session>> s, const std::string& what) {
      ASSERT_FALSE(s.ok()) << "loaded: " << what;
      EXPECT_NE(s.status().message().find(what), std::string::npos) << s.status().message();
    };
    // One index byte short of 3 x 5 weights at 4 bits (8 bytes).
    expect_error(LoadOne(4, 3, 5, RandomFloat({16}, 1), RandomIndices(3, 4, 4, 16, 2), Tensor(), be), "packed indices");
    // An index past a 12-entry codebook: weight 14 (the low nibble of byte 7) is entry 13.
    Tensor idx = RandomIndices(3, 5, 4, 12, 3);
    ASSERT_TRUE(LoadOne(4, 3, 5, RandomFloat({12}, 1), idx, Tensor(), be).ok());
    idx.data<uint8_t>()[7] = 0x0D;
    expect_error(LoadOne(4, 3, 5, RandomFloat({12}, 1), idx, Tensor(), be), "past the codebook");
    // The unused high nibble of the last byte is never read.
    idx.data<uint8_t>()[7] = 0xF1;
    EXPECT_TRUE(LoadOne(4, 3, 5, RandomFloat({12}, 1), idx, Tensor(), be).ok());
    // 17 entries cannot be addressed by 4-bit indices.
    expect_error(LoadOne(4, 3, 5, RandomFloat({17}, 1), RandomIndices(3, 5, 4, 16, 2), Tensor(), be), "codebook");
    expect_error(LoadOne(3, 3, 5, RandomFloat({4}, 1), RandomIndices(3, 5, 4, 4, 2), Tensor(), be), "bits must be 4 or 8");
    expect_error(LoadOne(8, 3, 5, RandomFloat({4}, 1), RandomIndices(3, 5, 8, 4, 2), RandomFloat({4}, 3), be), "bias");
  }
}


// A codebook fed at run time (a training graph's param) with constant indices: the fast kernel
// runs, and a codebook that does not cover the largest index is refused on the call.
TEST(CodebookMatMul, FedCodebookWithConstantIndices) {
  RegisterAllOps();
  const int64_t n = 37, k = 19;
  const Tensor idx = RandomIndices(n, k, 4, 10, 5);
  std::vector<Tensor> outs;
  for (Backend be : {Backend::kReference, Backend::kCpu}) {
    GraphBuilder b(17);
    b.Input("x", DType::kFloat32, {Dim::Symbol("batch"), k}).Input("cb", DType::kFloat32, {Dim::Symbol("c")}).Init("idx", idx);
    b.Op("CodebookMatMul", {"x", "cb", "idx"}, {"y"}, Attrs(4, n, k)).Output("y");
    Graph g = b.Build();
    g.nodes().back().domain = kWhittleDomain;
    g.opset_imports[kWhittleDomain] = 1;
    SessionOptions so;
    so.backend = be;
    auto s = Session::FromGraph(std::move(g), so);
    ASSERT_TRUE(s.ok()) << s.status().message();
    auto y = (*s)->Run({{"x", RandomFloat({9, k}, 6)}, {"cb", RandomFloat({10}, 7)}});
    ASSERT_TRUE(y.ok()) << y.status().message();
    outs.push_back((*y)[0]);
    auto bad = (*s)->Run({{"x", RandomFloat({9, k}, 6)}, {"cb", RandomFloat({3}, 7)}});
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.status().message().find("codebook"), std::string::npos) << bad.status().message();
  }
  EXPECT_TRUE(::whittle::testing::TensorsClose(outs[1], outs[0], 1e-4f, 1e-4f));
}

}  // namespace
}  // namespace whittle
