// --int8 on models as exporters write them: opset 11 with HardSigmoid, weights in Constant nodes
// (Paddle2ONNX), attributes that became inputs at 13 — and a clear refusal when an op really
// changed meaning.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "lib/data/dataset.h"
#include "lib/onnx/model_io.h"
#include "passes/quantize/opset_upgrade.h"
#include "tests/passes/pass_test_util.h"
#include "tests/util/graph_builder.h"
#include "tests/util/scratch_dir.h"
#include "tests/util/test_util.h"
#include "whittle/session.h"

namespace whittle {
namespace {

using testing::GraphBuilder;

AttributeMap ConstantOf(Tensor t) {
  AttributeMap a;
  a.Set("value", Attribute::TensorValue(std::move(t)));
  return a;
}

// x[N,16] -> MatMul(W1 from a Constant node) -> HardSigmoid -> Unsqueeze(axes attr) ->
// Squeeze(axes attr) -> Gemm(W2, b from Constant nodes) -> y[N,4], opset 11.
Graph ExportedLikeGraph() {
  AttributeMap axes;
  axes.Set("axes", Attribute::Ints({1}));
  AttributeMap hs;
  hs.Set("alpha", Attribute::Float(0.2f));
  return GraphBuilder(11)
      .Input("x", DType::kFloat32, {Dim::Symbol("N"), 16})
      .Op("Constant", {}, {"W1"}, ConstantOf(testing::RandomFloat({16, 32}, 1)))
      .Op("Constant", {}, {"W2"}, ConstantOf(testing::RandomFloat({32, 4}, 2)))
      .Op("Constant", {}, {"b2"}, ConstantOf(testing::RandomFloat({4}, 3)))
      .Op("MatMul", {"x", "W1"}, {"h"})
      .Op("HardSigmoid", {"h"}, {"a"}, hs)
      .Op("Unsqueeze", {"a"}, {"u"}, axes)
      .Op("Squeeze", {"u"}, {"s"}, axes)
      .Op("Gemm", {"s", "W2", "b2"}, {"y"})
      .Output("y")
      .Build();
}

TEST(ExportedModels, ConstantNodesAreLiftedToInitializersAtLoad) {
  testing::ScratchDir dir;
  Graph g = ExportedLikeGraph();
  ASSERT_TRUE(SaveModel(g, dir / "m.onnx").ok());
  auto loaded = LoadModel(dir / "m.onnx");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  for (const Node& n : loaded->nodes()) EXPECT_NE(n.op_type, "Constant");
  const int w1 = loaded->FindValue("W1");
  ASSERT_GE(w1, 0);
  EXPECT_TRUE(loaded->value(w1).is_constant());
  EXPECT_EQ(loaded->value(w1).initializer->dims(), (Dims{16, 32}));
  // Structure-only loading keeps the nodes as written.
  LoadOptions raw;
  raw.validate_ops = false;
  auto as_written = LoadModel(dir / "m.onnx", raw);
  ASSERT_TRUE(as_written.ok());
  int constants = 0;
  for (const Node& n : as_written->nodes()) constants += n.op_type == "Constant";
  EXPECT_EQ(constants, 3);
}

TEST(ExportedModels, Int8OnOpset11WithHardSigmoidAndConstantWeights) {
  testing::ScratchDir dir;
  ASSERT_TRUE(SaveModel(ExportedLikeGraph(), dir / "m.onnx").ok());
  auto loaded = LoadModel(dir / "m.onnx");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  Graph original = *loaded;
  Graph g = *loaded;
  auto calib = MakeDataset(testing::RandomFloat({64, 16}, 7), Tensor(), "random");
  ASSERT_TRUE(calib.ok());
  PassContext ctx;
  ctx.calibration = &*calib;
  auto r = testing::RunPass(g, "int8", "", ctx);
  ASSERT_TRUE(r.ok()) << r.status().message();
  int quantized = 0;
  for (const LayerReport& l : r->layers) quantized += l.action != "skipped";
  EXPECT_EQ(quantized, 2);
  EXPECT_EQ(g.OpsetFor(""), 13);
  // The converted graph computes what the original did, up to int8 error.
  auto s0 = Session::FromGraph(original);
  auto s1 = Session::FromGraph(g);
  ASSERT_TRUE(s0.ok() && s1.ok());
  const Tensor x = testing::RandomFloat({8, 16}, 9);
  auto y0 = (*s0)->Run({{"x", x}});
  auto y1 = (*s1)->Run({{"x", x}});
  ASSERT_TRUE(y0.ok() && y1.ok());
  const float* a = (*y0)[0].data<float>();
  const float* b = (*y1)[0].data<float>();
  double max_err = 0, max_abs = 0;
  for (int64_t i = 0; i < (*y0)[0].numel(); ++i) {
    max_err = std::max(max_err, static_cast<double>(std::fabs(a[i] - b[i])));
    max_abs = std::max(max_abs, static_cast<double>(std::fabs(a[i])));
  }
  EXPECT_LT(max_err, 0.05 * max_abs + 1e-3);
}

TEST(ExportedModels, OpsThatChangedMeaningBlockTheUpgradeByName) {
  AttributeMap ax;
  ax.Set("axis", Attribute::Int(1));
  Graph g = GraphBuilder(11)
                .Input("x", DType::kFloat32, {2, 3, 4})
                .Op("Softmax", {"x"}, {"y"}, ax)
                .Output("y")
                .Build();
  ASSERT_TRUE(InferShapes(g).ok());
  std::vector<std::string> notes;
  Status s = quant::UpgradeOpsetTo13(g, &notes);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("Softmax 11 -> 13: attribute 'axis' changed its default"), std::string::npos)
      << s.message();
  EXPECT_EQ(g.OpsetFor(""), 11);  // untouched
}

}  // namespace
}  // namespace whittle
