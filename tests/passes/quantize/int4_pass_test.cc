// The --int4 pass: round-to-nearest and GPTQ block quantization (the codes and parameters the
// math promises), the rewrite into DequantizeLinear(block_size) + MatMul at opset 21 or into
// MatMulNBits (the same numbers either way), the save -> load round trip, idempotence, and GPTQ
// beating round-to-nearest on the layer output error it minimizes.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "lib/data/dataset.h"
#include "lib/onnx/model_io.h"
#include "lib/ops/op_def.h"
#include "passes/cost.h"
#include "passes/quantize/gptq.h"
#include "tests/passes/pass_test_util.h"
#include "tests/passes/quantize/weight_only_test_graph.h"
#include "tests/util/graph_builder.h"
#include "tests/util/test_util.h"
#include "whittle/session.h"

namespace whittle {
namespace {

using ::whittle::testing::CountOps;
using ::whittle::testing::GraphBuilder;
using ::whittle::testing::RandomFloat;
using ::whittle::testing::RunGraph;
using ::whittle::testing::RunPass;

Graph TwoLayers() { return ::whittle::testing::WeightOnlyTwoLayers(); }

TEST(Int4Math, RoundToNearestStaysWithinHalfAStep) {
  const int64_t n = 7, k = 70, block = 32;
  const Tensor w = RandomFloat({n, k}, 11);
  for (bool sym : {false, true}) {
    const quant::Int4Blocks q = quant::QuantizeRtn(w.data<float>(), n, k, block, sym);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < k; ++c) {
        const float s = q.scale[static_cast<size_t>(r * q.blocks() + c / block)];
        ASSERT_LE(std::fabs(q.Dequant(r, c) - w.data<float>()[r * k + c]), 0.5f * s + 1e-6f)
            << (sym ? "symmetric" : "asymmetric") << " [" << r << ", " << c << "]";
        ASSERT_LE(q.codes[static_cast<size_t>(r * k + c)], 15);
      }
    if (sym) {
      for (uint8_t z : q.zero) ASSERT_EQ(z, 8);
    }
  }
}

// GPTQ minimizes || X W^T - X Q^T ||: on strongly correlated inputs it must beat rounding each
// weight alone, measured on the same inputs.
TEST(Int4Math, GptqBeatsRoundingOnTheLayerOutput) {
  const int64_t n = 16, k = 64, rows = 512, block = 32;
  std::mt19937 rng(5);
  std::normal_distribution<float> nd;
  std::vector<float> x(static_cast<size_t>(rows * k));
  for (int64_t r = 0; r < rows; ++r) {
    const float common = nd(rng);
    for (int64_t c = 0; c < k; ++c) x[static_cast<size_t>(r * k + c)] = common + 0.3f * nd(rng);
  }
  std::vector<double> gram(static_cast<size_t>(k * k), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < k; ++j)
        gram[static_cast<size_t>(i * k + j)] += static_cast<double>(x[static_cast<size_t>(r * k + i)]) * x[static_cast<size_t>(r * k + j)];
  const Tensor w = RandomFloat({n, k}, 12);
  auto out_err = [&](const quant::Int4Blocks& q) {
    double e = 0;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t o = 0; o < n; ++o) {
        double d = 0;
        for (int64_t c = 0; c < k; ++c)
          d += static_cast<double>(x[static_cast<size_t>(r * k + c)]) * (w.data<float>()[o * k + c] - q.Dequant(o, c));
        e += d * d;
      }
    return e;
  };
  for (bool sym : {false, true}) {
    quant::Int4Blocks g;
    ASSERT_TRUE(quant::QuantizeGptq(w.data<float>(), n, k, block, sym, gram, &g));
    const double rtn = out_err(quant::QuantizeRtn(w.data<float>(), n, k, block, sym)), gptq = out_err(g);
    EXPECT_LT(gptq, 0.7 * rtn) << (sym ? "symmetric" : "asymmetric") << ": gptq " << gptq << " rtn " << rtn;
  }
}

TEST(Int4Pass, QdqAndMatMulNBitsComputeTheSameAndRoundTrip) {
  RegisterAllOps();
  const Tensor x = RandomFloat({5, 64}, 21);
  const Graph original = TwoLayers();
  auto want = RunGraph(original, x);
  ASSERT_TRUE(want.ok());
  std::vector<Tensor> outs;
  for (const char* format : {"qdq", "matmulnbits"}) {
    SCOPED_TRACE(format);
    Graph g = original;
    auto rep = RunPass(g, "int4", std::string("block=32,format=") + format);
    ASSERT_TRUE(rep.ok()) << rep.status().message();
    ASSERT_EQ(rep->layers.size(), 2u);
    // Each layer keeps its weights, as params, in either form; the graph's count is the weights
    // plus one scale and one zero point per block of 32 (and fc1's bias), whatever the form.
    for (const LayerReport& l : rep->layers) {
      EXPECT_GT(l.params_before, 0);
      EXPECT_EQ(l.params_after, l.params_before) << l.node;
    }
    const GraphCost before = ComputeCost(original), after = ComputeCost(g);
    EXPECT_GT(after.params, before.params);
    EXPECT_LT(after.params, before.params + before.params / 16 + 64);
    EXPECT_LT(after.param_bytes, before.param_bytes / 4);
    if (std::string(format) == "qdq") {
      EXPECT_EQ(g.OpsetFor(""), 21);
      EXPECT_EQ(CountOps(g, "DequantizeLinear"), 2);
      EXPECT_EQ(CountOps(g, "MatMul"), 2);
      EXPECT_EQ(CountOps(g, "Add"), 1);  // fc1's bias
    } else {
      EXPECT_EQ(CountOps(g, "MatMulNBits"), 2);
      EXPECT_EQ(g.OpsetFor("com.microsoft"), 1);
    }
    auto got = RunGraph(g, x);
    ASSERT_TRUE(got.ok()) << got.status().message();
    // 4-bit weights: close to the float model, not equal.
    double err = 0, energy = 0;
    for (int64_t i = 0; i < (*want)[0].numel(); ++i) {
      const double d = (*got)[0].data<float>()[i] - (*want)[0].data<float>()[i];
      err += d * d;
      energy += static_cast<double>((*want)[0].data<float>()[i]) * (*want)[0].data<float>()[i];
    }
    EXPECT_LT(std::sqrt(err / energy), 0.15);
    EXPECT_GT(err, 0.0);
    // Save -> load gives the same outputs; a second run of the pass changes nothing.
    const std::string path = ::testing::TempDir() + "/int4_" + format + ".onnx";
    ASSERT_TRUE(SaveModel(g, path).ok());
    auto loaded = LoadModel(path);
    ASSERT_TRUE(loaded.ok()) << loaded.status().message();
    auto again = RunGraph(*loaded, x);
    ASSERT_TRUE(again.ok()) << again.status().message();
    EXPECT_TRUE(::whittle::testing::TensorsClose((*again)[0], (*got)[0], 0.f, 0.f));
    Graph twice = *loaded;
    auto rep2 = RunPass(twice, "int4", "block=32");
    ASSERT_TRUE(rep2.ok()) << rep2.status().message();
    int rewritten = 0;
    for (const LayerReport& l : rep2->layers) rewritten += l.action == "int4";
    EXPECT_EQ(rewritten, 0);
    outs.push_back((*got)[0]);
  }
  EXPECT_TRUE(::whittle::testing::TensorsClose(outs[0], outs[1], 1e-5f, 1e-5f));
}

// accuracy_level=4 is written on every MatMulNBits node; the model then computes within int8
// rounding of the level-0 one (exactly equal where the CPU has no AVX512-VNNI: a hint).
TEST(Int4Pass, AccuracyLevelIsWrittenOnMatMulNBits) {
  RegisterAllOps();
  const Tensor x = RandomFloat({5, 64}, 22);
  std::vector<Tensor> outs;
  for (const char* spec : {"format=matmulnbits", "format=matmulnbits,accuracy_level=4"}) {
    SCOPED_TRACE(spec);
    Graph g = TwoLayers();
    auto rep = RunPass(g, "int4", spec);
    ASSERT_TRUE(rep.ok()) << rep.status().message();
    int nodes = 0;
    for (const Node& n : g.nodes())
      if (n.op_type == "MatMulNBits") {
        ++nodes;
        EXPECT_EQ(n.attrs.GetInt("accuracy_level", 0), std::string(spec).find("=4") != std::string::npos ? 4 : 0);
      }
    EXPECT_EQ(nodes, 2);
    auto got = RunGraph(g, x);
    ASSERT_TRUE(got.ok()) << got.status().message();
    outs.push_back((*got)[0]);
  }
  double err = 0, energy = 0;
  for (int64_t i = 0; i < outs[0].numel(); ++i) {
    const double d = outs[1].data<float>()[i] - outs[0].data<float>()[i];
    err += d * d;
    energy += static_cast<double>(outs[0].data<float>()[i]) * outs[0].data<float>()[i];
  }
  EXPECT_LT(std::sqrt(err / energy), 0.03);  // int8 activations: ~1% of the output's energy here
}

TEST(Int4Pass, BadOptionsAndGptqWithoutDataAreRefused) {
  RegisterAllOps();
  Graph g = TwoLayers();
  for (const char* spec : {"block=48", "block=8", "method=awq2", "format=qoperator", "symmetric=2", "bogus=1",
                           "accuracy_level=4", "format=qdq,accuracy_level=4", "format=matmulnbits,accuracy_level=5"}) {
    Graph c = g;
    EXPECT_FALSE(RunPass(c, "int4", spec).ok()) << spec;
  }
  Graph c = g;
  auto r = RunPass(c, "int4", "method=gptq");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--calibration-data"), std::string::npos) << r.status().message();
}

TEST(Int4Pass, GptqWithCalibrationDataRuns) {
  RegisterAllOps();
  Graph g = TwoLayers();
  auto data = MakeDataset(RandomFloat({64, 64}, 31), Tensor(), "random");
  ASSERT_TRUE(data.ok()) << data.status().message();
  PassContext ctx;
  ctx.calibration = &*data;
  auto rep = RunPass(g, "int4", "method=gptq,symmetric=1", ctx);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  for (const LayerReport& l : rep->layers) EXPECT_EQ(l.detail.rfind("gptq", 0), 0u) << l.detail;
  EXPECT_EQ(CountOps(g, "DequantizeLinear"), 2);
}

}  // namespace
}  // namespace whittle
