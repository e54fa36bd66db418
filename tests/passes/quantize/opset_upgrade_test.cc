// --int8 on models as exporters write them: opset 11 with HardSigmoid, weights in Constant nodes
// (Paddle2ONNX), attributes that became inputs at 13 — and a clear refusal when an op really
// changed meaning.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "lib/data/dataset.h"
#include "lib/data/npy.h"
#include "runtime/evaluate.h"
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

// TorchScript's exporter writes tensors of equal value once and gives each further reader an
// Identity of the initializer (here a chain of two, and one Identity that is a graph output).
TEST(ExportedModels, IdentitiesOfInitializersAreLiftedAtLoad) {
  testing::ScratchDir dir;
  AttributeMap tb;
  tb.Set("transB", Attribute::Int(1));
  Graph g = GraphBuilder(11)
                .Input("x", DType::kFloat32, {Dim::Symbol("N"), 4})
                .Init("W1", testing::RandomFloat({4, 4}, 1))
                .Init("W2", testing::RandomFloat({4, 4}, 2))
                .Init("b", testing::RandomFloat({4}, 3))
                .Op("Identity", {"b"}, {"b_1"})
                .Op("Identity", {"b_1"}, {"b_2"})
                .Op("Identity", {"b"}, {"b_out"})
                .Op("Gemm", {"x", "W1", "b"}, {"h"}, tb)
                .Op("Gemm", {"h", "W2", "b_2"}, {"y"}, tb)
                .Output("y")
                .Output("b_out")
                .Build();
  ASSERT_TRUE(SaveModel(g, dir / "m.onnx").ok());
  auto loaded = LoadModel(dir / "m.onnx");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  int identities = 0;
  for (const Node& n : loaded->nodes()) identities += n.op_type == "Identity";
  EXPECT_EQ(identities, 1);  // the graph output's stays a node
  const Value& b = loaded->value(loaded->FindValue("b"));
  const Value& b2 = loaded->value(loaded->FindValue("b_2"));
  ASSERT_TRUE(b2.is_constant());
  EXPECT_TRUE(b2.initializer->BitwiseEquals(*b.initializer));
  EXPECT_NE(b2.initializer->buffer(), b.initializer->buffer());  // a pass may rewrite one alone
  // Both Gemms now read a constant bias: --int8 quantizes both.
  auto calib = MakeDataset(testing::RandomFloat({32, 4}, 7), Tensor(), "random");
  ASSERT_TRUE(calib.ok());
  PassContext ctx;
  ctx.calibration = &*calib;
  Graph q = *loaded;
  auto r = testing::RunPass(q, "int8", "", ctx);
  ASSERT_TRUE(r.ok()) << r.status().message();
  int quantized = 0;
  for (const LayerReport& l : r->layers) quantized += l.action == "int8";
  EXPECT_EQ(quantized, 2);
  // Structure-only loading keeps the nodes as written.
  LoadOptions raw;
  raw.validate_ops = false;
  auto as_written = LoadModel(dir / "m.onnx", raw);
  ASSERT_TRUE(as_written.ok());
  identities = 0;
  for (const Node& n : as_written->nodes()) identities += n.op_type == "Identity";
  EXPECT_EQ(identities, 3);
}

// The corpus's ResNet from both PyTorch exporters: TorchScript's reads 6 of its 8 Conv biases
// through such Identities; dynamo's pools with ReduceMean over [-1, -2] and flattens with
// Reshape [-1, 32]. --int8 and --prune take every Conv of both.
TEST(ExportedModels, ExportedResnetsAreCompressedWhole) {
  for (const std::string file : {"resnet_op11.onnx", "resnet_op18_dynamo.onnx"}) {
    SCOPED_TRACE(file);
    auto loaded = LoadModel(std::string(WHITTLE_SOURCE_DIR) + "/tests/corpus/" + file);
    ASSERT_TRUE(loaded.ok()) << loaded.status().message();
    auto calib = MakeDataset(testing::RandomFloat({32, 1, 28, 28}, 5), Tensor(), "random");
    ASSERT_TRUE(calib.ok());
    PassContext ctx;
    ctx.calibration = &*calib;
    int convs = 0;
    for (const Node& n : loaded->nodes()) convs += n.op_type == "Conv";
    EXPECT_EQ(convs, 8);
    Graph q = *loaded;
    auto r = testing::RunPass(q, "int8", "", ctx);
    ASSERT_TRUE(r.ok()) << r.status().message();
    int quantized = 0;
    for (const LayerReport& l : r->layers) quantized += l.op_type == "Conv" && l.action == "int8";
    EXPECT_EQ(quantized, convs);
    Graph p = *loaded;
    auto pr = testing::RunPass(p, "prune", "ratio=0.3");
    ASSERT_TRUE(pr.ok()) << pr.status().message();
    int pruned = 0;
    for (const LayerReport& l : pr->layers) pruned += l.op_type == "Conv" && l.action == "prune";
    EXPECT_EQ(pruned, convs);
  }
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

namespace whittle {
namespace {

// A byte classifier as a Keras export has it: int32 byte values -> Gather(embedding) -> Flatten
// -> Gemm -> logits; calibrated and evaluated from an int32 .npy without conversion.
TEST(ExportedModels, Int8OnAModelWithAnInt32InputFromNpy) {
  testing::ScratchDir dir;
  AttributeMap tb;
  tb.Set("transB", Attribute::Int(1));
  Graph g = GraphBuilder(13)
                .Input("bytes", DType::kInt32, {Dim::Symbol("N"), 8})
                .Init("emb", testing::RandomFloat({256, 4}, 11))
                .Init("W", testing::RandomFloat({5, 32}, 12))
                .Init("b", testing::RandomFloat({5}, 13))
                .Op("Gather", {"emb", "bytes"}, {"e"})
                .Op("Flatten", {"e"}, {"f"})
                .Op("Gemm", {"f", "W", "b"}, {"logits"}, tb)
                .Output("logits")
                .Build();
  std::vector<int32_t> bytes(64 * 8);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<int32_t>((i * 37 + 11) % 256);
  ASSERT_TRUE(WriteNpy(dir / "x.npy", Tensor::FromVector<int32_t>({64, 8}, bytes)).ok());
  auto calib = LoadDataset("npy:" + (dir / "x.npy"));
  ASSERT_TRUE(calib.ok()) << calib.status().message();
  ASSERT_EQ(calib->inputs.dtype(), DType::kInt32);
  ASSERT_TRUE(InferShapes(g).ok());
  Graph original = g;
  PassContext ctx;
  ctx.calibration = &*calib;
  auto r = testing::RunPass(g, "int8", "", ctx);
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto s0 = Session::FromGraph(original);
  auto s1 = Session::FromGraph(g);
  ASSERT_TRUE(s0.ok() && s1.ok());
  auto p0 = PredictTop1(**s0, calib->inputs);
  auto p1 = PredictTop1(**s1, calib->inputs);
  ASSERT_TRUE(p0.ok() && p1.ok()) << p0.status().message() << p1.status().message();
  int agree = 0;
  for (int64_t i = 0; i < 64; ++i) agree += p0->data<int64_t>()[i] == p1->data<int64_t>()[i];
  EXPECT_GE(agree, 60);
  // int64 data for an int32 input is converted (values fit); float data is refused by name.
  std::vector<int64_t> wide(bytes.begin(), bytes.end());
  auto p2 = PredictTop1(**s0, Tensor::FromVector<int64_t>({64, 8}, wide));
  ASSERT_TRUE(p2.ok()) << p2.status().message();
  auto p3 = PredictTop1(**s0, testing::RandomFloat({4, 8}, 1));
  ASSERT_FALSE(p3.ok());
  EXPECT_EQ(p3.status().message(), "input 'bytes' takes int32, and the data is float32");
}

}  // namespace
}  // namespace whittle
