// Element-wise float math on dequantized bytes as one Lookup table: which regions are replaced
// (and which must not be), and that the optimized CPU session computes exactly what the reference
// kernels compute for the graph as written, on every byte value.
#include "runtime/rewrite/fuse_lookup.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cpu/lookup.h"
#include "runtime/rewrite/rewrite.h"
#include "whittle/session.h"
#include "tests/util/graph_builder.h"
#include "tests/util/test_util.h"

namespace whittle {
namespace {

using testing::CountOps;
using testing::GraphBuilder;

AttributeMap AxisOne() {
  AttributeMap a;
  a.Set("axis", Attribute::Int(1));
  return a;
}

// x [2, 3, 11, 13] of dtype dt holding every byte value (and more).
Tensor EveryByte(DType dt) {
  Tensor x(dt, {2, 3, 11, 13});
  for (int64_t i = 0; i < x.numel(); ++i) static_cast<uint8_t*>(x.raw_data())[i] = static_cast<uint8_t>(i * 7 + 3);
  return x;
}

// DequantizeLinear(x) -> SiLU (Sigmoid, Mul) -> [QuantizeLinear] -> y, as EfficientNet's int8
// export has it; second_dq: the Mul reads its own DequantizeLinear of x (same parameters).
Graph Silu(DType dt, bool quantize, bool second_dq = false) {
  GraphBuilder b;
  b.Input("x", dt, {Dim(2), Dim(3), Dim(11), Dim(13)});
  b.Init("s", Tensor::Scalar<float>(0.05f));
  if (dt == DType::kUInt8) b.Init("z", Tensor::Scalar<uint8_t>(131));
  else b.Init("z", Tensor::Scalar<int8_t>(-7));
  b.Op("DequantizeLinear", {"x", "s", "z"}, {"v"});
  if (second_dq) b.Op("DequantizeLinear", {"x", "s", "z"}, {"v2"});
  b.Op("Sigmoid", {"v"}, {"sig"});
  b.Op("Mul", {second_dq ? "v2" : "v", "sig"}, {"silu"});
  if (quantize) {
    b.Init("ys", Tensor::Scalar<float>(0.031f));
    b.Init("yz", Tensor::Scalar<uint8_t>(9));
    b.Op("QuantizeLinear", {"silu", "ys", "yz"}, {"y"});
    b.Output("y");
  } else {
    b.Output("silu");
  }
  return b.Build();
}

// The optimized session on backend against the reference kernels on the graph as written.
void ExpectExactOnEveryByte(const Graph& g, const Tensor& x, Backend backend = Backend::kCpu) {
  SessionOptions fast, plain;
  fast.backend = backend;
  plain.backend = Backend::kReference;
  plain.optimize = false;
  auto a = Session::FromGraph(g, fast);
  auto b = Session::FromGraph(g, plain);
  ASSERT_TRUE(a.ok() && b.ok());
  auto ya = (*a)->Run({{"x", x}});
  auto yb = (*b)->Run({{"x", x}});
  ASSERT_TRUE(ya.ok()) << ya.status().message();
  ASSERT_TRUE(yb.ok()) << yb.status().message();
  ASSERT_EQ((*ya)[0].dtype(), (*yb)[0].dtype());
  ASSERT_EQ((*ya)[0].nbytes(), (*yb)[0].nbytes());
  EXPECT_EQ(std::memcmp((*ya)[0].raw_data(), (*yb)[0].raw_data(), (*ya)[0].nbytes()), 0);
}

TEST(FuseLookupTables, SiluBetweenQuantizeLinearsBecomesOneByteTable) {
  for (DType dt : {DType::kUInt8, DType::kInt8}) {
    for (bool second_dq : {false, true}) {
      SCOPED_TRACE(std::string(DTypeName(dt)) + (second_dq ? ", two DequantizeLinears" : ""));
      Graph g = Silu(dt, true, second_dq);
      auto r = RewriteForRuntime(g, std::nullopt, true);
      ASSERT_TRUE(r.ok()) << r.status().message();
      EXPECT_EQ(r->fused_lookup_tables, 1);
      EXPECT_EQ(CountOps(g, "Lookup"), 1);
      for (const char* op : {"DequantizeLinear", "Sigmoid", "Mul", "QuantizeLinear"}) EXPECT_EQ(CountOps(g, op), 0) << op;
      ExpectExactOnEveryByte(Silu(dt, true, second_dq), EveryByte(dt));
      ExpectExactOnEveryByte(Silu(dt, true, second_dq), EveryByte(dt), Backend::kReference);
    }
  }
}

TEST(FuseLookupTables, FloatResultsAreTabulatedOnlyForCostlyOps) {
  // SiLU with a float result (EfficientNet's squeeze-and-excitation input): a float table.
  Graph g = Silu(DType::kUInt8, false);
  auto r = RewriteForRuntime(g, std::nullopt, true);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->fused_lookup_tables, 1);
  ExpectExactOnEveryByte(Silu(DType::kUInt8, false), EveryByte(DType::kUInt8));
  // Relu then Add of a scalar to a float result: cheaper as written, left alone.
  GraphBuilder b;
  b.Input("x", DType::kUInt8, {Dim(2), Dim(3), Dim(11), Dim(13)});
  b.Init("s", Tensor::Scalar<float>(0.05f));
  b.Init("z", Tensor::Scalar<uint8_t>(131));
  b.Init("c", Tensor::Scalar<float>(0.5f));
  b.Op("DequantizeLinear", {"x", "s", "z"}, {"v"});
  b.Op("Relu", {"v"}, {"r"});
  b.Op("Add", {"r", "c"}, {"y"});
  b.Output("y");
  Graph cheap = b.Build();
  auto rc = RewriteForRuntime(cheap, std::nullopt, true);
  ASSERT_TRUE(rc.ok());
  EXPECT_EQ(rc->fused_lookup_tables, 0);
  // ... but before a QuantizeLinear a byte table (HardSwish, as MobileNetV3 has it).
  GraphBuilder h;
  h.Input("x", DType::kUInt8, {Dim(2), Dim(3), Dim(11), Dim(13)});
  h.Init("s", Tensor::Scalar<float>(0.05f));
  h.Init("z", Tensor::Scalar<uint8_t>(131));
  h.Init("ys", Tensor::Scalar<float>(0.02f));
  h.Init("yz", Tensor::Scalar<uint8_t>(40));
  h.Op("DequantizeLinear", {"x", "s", "z"}, {"v"});
  h.Op("HardSwish", {"v"}, {"hs"});
  h.Op("QuantizeLinear", {"hs", "ys", "yz"}, {"y"});
  h.Output("y");
  Graph hswish = h.Build();
  Graph copy = hswish;
  auto rh = RewriteForRuntime(copy, std::nullopt, true);
  ASSERT_TRUE(rh.ok());
  EXPECT_EQ(rh->fused_lookup_tables, 1);
  ExpectExactOnEveryByte(hswish, EveryByte(DType::kUInt8));
}

TEST(FuseLookupTables, RegionsThatAreNotFunctionsOfOneByteStay) {
  // Per-channel DequantizeLinear parameters; two results read outside; the flag off (what a CUDA
  // session passes).
  auto with = [](const std::string& what) {
    GraphBuilder b;
    b.Input("x", DType::kUInt8, {Dim(2), Dim(3), Dim(11), Dim(13)});
    if (what == "per-channel") {
      b.Init("s", Tensor::FromVector<float>({3}, {0.05f, 0.1f, 0.2f}));
      b.Init("z", Tensor::FromVector<uint8_t>({3}, {1, 2, 3}));
    } else {
      b.Init("s", Tensor::Scalar<float>(0.05f));
      b.Init("z", Tensor::Scalar<uint8_t>(131));
    }
    b.Init("c", what == "tensor operand" ? testing::RandomFloat({13}, 1) : Tensor::Scalar<float>(2.f));
    b.Op("DequantizeLinear", {"x", "s", "z"}, {"v"}, what == "per-channel" ? AxisOne() : AttributeMap{});
    b.Op("Sigmoid", {"v"}, {"sig"});
    b.Op("Mul", {"sig", "c"}, {"y"});
    b.Output("y");
    if (what == "two results") b.Output("sig");
    return b.Build();
  };
  for (const char* what : {"per-channel", "two results", "flag off"}) {
    SCOPED_TRACE(what);
    Graph g = with(what);
    auto r = RewriteForRuntime(g, std::nullopt, std::string(what) != "flag off");
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->fused_lookup_tables, 0);
    EXPECT_EQ(CountOps(g, "Lookup"), 0);
  }
  // A Mul by a tensor is no function of one byte: the Sigmoid before it is tabulated, the Mul stays.
  Graph g = with("tensor operand");
  auto r = RewriteForRuntime(g, std::nullopt, true);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->fused_lookup_tables, 1);
  EXPECT_EQ(CountOps(g, "Sigmoid"), 0);
  EXPECT_EQ(CountOps(g, "Mul"), 1);
  ExpectExactOnEveryByte(with("tensor operand"), EveryByte(DType::kUInt8));
}

// The lookups' vector forms (bytes: AVX-512 VBMI, AVX2; floats: AVX-512) against the table read
// one by one, on every byte and lengths with tails.
TEST(FuseLookupTables, LookupFormsAgree) {
  std::vector<uint8_t> table(256), x(1000), y(1000);
  std::vector<float> ftable(256), fy(1000);
  for (int i = 0; i < 256; ++i) {
    table[static_cast<size_t>(i)] = static_cast<uint8_t>((i * 37 + 11) ^ (i >> 3));
    ftable[static_cast<size_t>(i)] = static_cast<float>(i) * 0.37f - 20.f;
  }
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<uint8_t>(i * 13 + i / 256);
  for (int vector : {-1, 0}) {
    cpu::lookup_internal::SetLookupVector(vector);
    for (int64_t n : {1, 15, 16, 17, 31, 32, 63, 64, 65, 255, 1000}) {
      SCOPED_TRACE("n=" + std::to_string(n) + (vector == 0 ? ", one by one" : ""));
      std::fill(y.begin(), y.end(), 0);
      std::fill(fy.begin(), fy.end(), 0.f);
      cpu::LookupBytes(x.data(), n, table.data(), y.data());
      cpu::LookupFloats(x.data(), n, ftable.data(), fy.data());
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(y[static_cast<size_t>(i)], table[x[static_cast<size_t>(i)]]) << i;
        ASSERT_EQ(fy[static_cast<size_t>(i)], ftable[x[static_cast<size_t>(i)]]) << i;
      }
      for (size_t i = static_cast<size_t>(n); i < y.size(); ++i) {
        ASSERT_EQ(y[i], 0) << "wrote past the end at " << i;
        ASSERT_EQ(fy[i], 0.f) << "wrote past the end at " << i;
      }
    }
  }
  cpu::lookup_internal::SetLookupVector(-1);
}

}  // namespace
}  // namespace whittle
