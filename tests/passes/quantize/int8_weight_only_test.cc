// --int8 mode=weight-only: MatMul/Gemm weights to blocked int8 (symmetric) or uint8 with zero
// points, written as opset 21 DequantizeLinear(block_size, axis 0) -> MatMul [+ Add]; the
// runtime computes exactly the dequantized math (whatever it folds or fuses at load), the
// output is close to the float model's, the file round-trips, a second run changes nothing,
// and the options of the other modes are refused with it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "lib/data/dataset.h"
#include "lib/onnx/model_io.h"
#include "lib/ops/op_def.h"
#include "tests/passes/pass_test_util.h"
#include "tests/passes/quantize/weight_only_test_graph.h"
#include "tests/util/graph_builder.h"
#include "tests/util/test_util.h"

namespace whittle {
namespace {

using ::whittle::testing::CountOps;
using ::whittle::testing::GraphBuilder;
using ::whittle::testing::RandomFloat;
using ::whittle::testing::RunGraph;
using ::whittle::testing::RunPass;

Graph TwoLayers() { return ::whittle::testing::WeightOnlyTwoLayers(); }

// The float [K, N] of the DequantizeLinear node named `name` (int8/uint8 codes, blocked along K).
std::vector<float> Dequantized(const Graph& g, const std::string& name, DType* dtype) {
  for (const Node& dq : g.nodes()) {
    if (dq.name != name) continue;
    const Tensor* q = g.ConstInput(dq, 0);
    const Tensor* s = g.ConstInput(dq, 1);
    const Tensor* z = g.ConstInput(dq, 2);
    *dtype = q->dtype();
    const int64_t K = q->dim(0), N = q->dim(1), block = dq.attrs.GetInt("block_size", 0);
    EXPECT_EQ(dq.attrs.GetInt("axis", 1), 0);
    auto at = [](const Tensor& t, int64_t i) {
      return t.dtype() == DType::kInt8 ? static_cast<int>(t.data<int8_t>()[i]) : static_cast<int>(t.data<uint8_t>()[i]);
    };
    std::vector<float> w(static_cast<size_t>(K * N));
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n) {
        const int64_t j = (k / block) * N + n;
        w[static_cast<size_t>(k * N + n)] = static_cast<float>(at(*q, k * N + n) - (z ? at(*z, j) : 0)) * s->data<float>()[j];
      }
    return w;
  }
  ADD_FAILURE() << "no node " << name;
  return {};
}

// || got - want || / || want ||.
double RelErr(const Tensor& got, const Tensor& want) {
  double err = 0, energy = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double d = got.data<float>()[i] - want.data<float>()[i];
    err += d * d;
    energy += static_cast<double>(want.data<float>()[i]) * want.data<float>()[i];
  }
  return std::sqrt(err / energy);
}

// relu(x W1 + b1) W2 with the weights as stored ([K, N] each).
Tensor Reference(const Tensor& x, const std::vector<float>& w1, const Tensor& b1, const std::vector<float>& w2) {
  const int64_t rows = x.dim(0);
  Tensor y(DType::kFloat32, {rows, 20});
  std::vector<double> h(48);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < 48; ++o) {
      double acc = b1.data<float>()[o];
      for (int64_t c = 0; c < 64; ++c) acc += static_cast<double>(x.data<float>()[r * 64 + c]) * w1[static_cast<size_t>(c * 48 + o)];
      h[static_cast<size_t>(o)] = std::max(0.0, acc);
    }
    for (int64_t o = 0; o < 20; ++o) {
      double acc = 0;
      for (int64_t c = 0; c < 48; ++c) acc += h[static_cast<size_t>(c)] * w2[static_cast<size_t>(c * 20 + o)];
      y.data<float>()[r * 20 + o] = static_cast<float>(acc);
    }
  }
  return y;
}

TEST(Int8WeightOnly, BlockedInt8RunsAsTheDequantizedMathAndRoundTrips) {
  RegisterAllOps();
  const Tensor x = RandomFloat({6, 64}, 21);
  const Graph original = TwoLayers();
  auto want = RunGraph(original, x);
  ASSERT_TRUE(want.ok());
  for (int sym : {0, 1}) {
    SCOPED_TRACE(sym ? "symmetric" : "zero points");
    Graph g = original;
    auto rep = RunPass(g, "int8", "mode=weight-only,block=32,symmetric=" + std::to_string(sym));
    ASSERT_TRUE(rep.ok()) << rep.status().message();
    ASSERT_EQ(rep->layers.size(), 2u);
    for (const LayerReport& l : rep->layers) {
      EXPECT_EQ(l.action, "int8");
      EXPECT_EQ(l.detail.rfind("rtn, blocks of 32", 0), 0u) << l.detail;
    }
    EXPECT_EQ(g.OpsetFor(""), 21);
    EXPECT_EQ(CountOps(g, "DequantizeLinear"), 2);
    EXPECT_EQ(CountOps(g, "MatMul"), 2);
    EXPECT_EQ(CountOps(g, "Gemm"), 0);
    DType t1 = DType::kUndefined, t2 = DType::kUndefined;
    const std::vector<float> w1 = Dequantized(g, "fc1/DequantizeLinear", &t1);
    const std::vector<float> w2 = Dequantized(g, "fc2/DequantizeLinear", &t2);
    EXPECT_EQ(t1, sym ? DType::kInt8 : DType::kUInt8);
    EXPECT_EQ(t2, t1);
    auto got = RunGraph(g, x);
    ASSERT_TRUE(got.ok()) << got.status().message();
    const Tensor b1 = *original.value(original.FindValue("b1")).initializer;
    EXPECT_TRUE(::whittle::testing::TensorsClose((*got)[0], Reference(x, w1, b1, w2), 1e-5f, 1e-5f));
    // 8 bits in blocks of 32: within a percent of the float model, but not equal to it.
    const double rel = RelErr((*got)[0], (*want)[0]);
    EXPECT_LT(rel, 0.01);
    EXPECT_GT(rel, 0.0);
    const std::string path = ::testing::TempDir() + "/int8_weight_only_" + std::to_string(sym) + ".onnx";
    ASSERT_TRUE(SaveModel(g, path).ok());
    auto loaded = LoadModel(path);
    ASSERT_TRUE(loaded.ok()) << loaded.status().message();
    auto again = RunGraph(*loaded, x);
    ASSERT_TRUE(again.ok()) << again.status().message();
    EXPECT_TRUE(::whittle::testing::TensorsClose((*again)[0], (*got)[0], 0.f, 0.f));
    // Idempotent: the weights now come from a DequantizeLinear, so nothing matches again, in
    // either weight-only pass.
    for (const char* pass : {"int8", "int4"}) {
      Graph twice = *loaded;
      auto rep2 = RunPass(twice, pass, std::string(pass) == "int8" ? "mode=weight-only" : "");
      ASSERT_TRUE(rep2.ok()) << rep2.status().message();
      for (const LayerReport& l : rep2->layers) EXPECT_NE(l.action, pass) << l.node;
    }
  }
}

TEST(Int8WeightOnly, GptqAndAwqRunWithCalibrationData) {
  RegisterAllOps();
  auto data = MakeDataset(RandomFloat({64, 64}, 31), Tensor(), "random");
  ASSERT_TRUE(data.ok()) << data.status().message();
  PassContext ctx;
  ctx.calibration = &*data;
  const Tensor x = RandomFloat({6, 64}, 22);
  auto want = RunGraph(TwoLayers(), x);
  ASSERT_TRUE(want.ok());
  for (const char* method : {"gptq", "awq"}) {
    SCOPED_TRACE(method);
    Graph g = TwoLayers();
    auto rep = RunPass(g, "int8", std::string("mode=weight-only,method=") + method, ctx);
    ASSERT_TRUE(rep.ok()) << rep.status().message();
    for (const LayerReport& l : rep->layers) EXPECT_EQ(l.detail.rfind(method, 0), 0u) << l.detail;
    EXPECT_EQ(CountOps(g, "Mul"), std::string(method) == "awq" ? 2 : 0);
    auto got = RunGraph(g, x);
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_LT(RelErr((*got)[0], (*want)[0]), 0.02);
  }
}

TEST(Int8WeightOnly, OptionsOfOtherModesAreRefused) {
  RegisterAllOps();
  for (const char* spec : {"mode=weight-only,format=qdq", "mode=weight-only,calibration=mse",
                           "mode=weight-only,per-channel=1", "mode=weight-only,block=48", "mode=weight-only,block=8",
                           "mode=weight-only,method=awq2", "mode=weight-only,bogus=1", "mode=weights"}) {
    Graph g = TwoLayers();
    auto r = RunPass(g, "int8", spec);
    EXPECT_FALSE(r.ok()) << spec;
  }
  Graph g = TwoLayers();
  auto r = RunPass(g, "int8", "mode=weight-only,method=gptq");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--calibration-data"), std::string::npos) << r.status().message();
  Graph m = TwoLayers();
  auto bad_mode = RunPass(m, "int8", "mode=weights");
  ASSERT_FALSE(bad_mode.ok());
  EXPECT_NE(bad_mode.status().message().find("weight-only"), std::string::npos) << bad_mode.status().message();
}

}  // namespace
}  // namespace whittle
