// --int8 mode=weight-only on Conv layers (passes/quantize/conv_weight_only.h): the bundled CNN's
// convs read int8 weights per output channel through DequantizeLinear(axis 0), activations stay
// float, the weights take about a quarter of the bytes, and the outputs stay close to the
// original's on real images.
#include <gtest/gtest.h>

#include <cmath>

#include "lib/data/dataset.h"
#include "lib/onnx/model_io.h"
#include "lib/ops/op_def.h"
#include "passes/cost.h"
#include "passes/pass_manager.h"
#include "passes/pass_registry.h"
#include "runtime/evaluate.h"
#include "tests/util/test_util.h"
#include "whittle/session.h"

namespace whittle {
namespace {

TEST(ConvWeightOnly, CnnConvsReadInt8WeightsAndStayClose) {
  auto g = LoadModel(std::string(WHITTLE_SOURCE_DIR) + "/models/cnn.onnx");
  ASSERT_TRUE(g.ok());
  ASSERT_TRUE(InferShapes(*g).ok());
  const Graph original = *g;
  auto opts = PassOptions::Parse("int8", "mode=weight-only,exclude=/fc1/Gemm,/fc2/Gemm");
  ASSERT_TRUE(opts.ok());
  auto pass = MakePass("int8", *opts);
  ASSERT_TRUE(pass.ok()) << pass.status().message();
  PassManager pm;
  pm.Add(std::move(*pass));
  auto reports = pm.Run(&*g, PassContext{});
  ASSERT_TRUE(reports.ok()) << reports.status().message();
  int convs = 0;
  for (const LayerReport& l : (*reports)[0].layers) convs += l.action == "int8-weights";
  EXPECT_EQ(convs, 2);
  for (const Node& n : g->nodes()) {
    if (n.op_type != "Conv") continue;
    const int w = n.inputs[1];
    ASSERT_GE(g->value(w).producer, 0) << n.name;
    const Node& dq = g->nodes()[static_cast<size_t>(g->value(w).producer)];
    EXPECT_EQ(dq.op_type, "DequantizeLinear");
    EXPECT_EQ(dq.attrs.GetInt("axis", -1), 0);
    EXPECT_EQ(g->ConstInput(dq, 0)->dtype(), DType::kInt8);
  }
  EXPECT_EQ(::whittle::testing::CountOps(*g, "QuantizeLinear"), 0);  // activations stay float
  const int64_t saved = ComputeCost(original).param_bytes - ComputeCost(*g).param_bytes;
  // ~3 of every 4 conv weight bytes, less a float scale and an int8 zero point per channel.
  EXPECT_EQ(saved, (16 * 9 + 32 * 16 * 9) * 3 - (16 + 32) * 5);

  auto data = LoadDataset("fashion-mnist:test", 200);
  ASSERT_TRUE(data.ok());
  auto a = Session::FromGraph(original);
  auto b = Session::FromGraph(*g);
  ASSERT_TRUE(a.ok() && b.ok());
  auto c = CompareOutputs(**a, **b, *data);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_GT(c->cosine, 0.9999);
  auto pa = PredictTop1(**a, *data), pb = PredictTop1(**b, *data);
  ASSERT_TRUE(pa.ok() && pb.ok());
  auto agree = CompareTop1(*pa, *pb);
  ASSERT_TRUE(agree.ok());
  EXPECT_GE(agree->accuracy, 0.99);
}

}  // namespace
}  // namespace whittle
