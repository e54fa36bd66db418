// --int8 attention=1 on an exported transformer: the activation x activation MatMuls of attention
// (Q·Kᵀ, softmax·V) are quantized too, and the model stays close to float.
#include <gtest/gtest.h>

#include "lib/data/dataset.h"
#include "lib/onnx/model_io.h"
#include "runtime/evaluate.h"
#include "tests/passes/pass_test_util.h"
#include "tests/util/test_util.h"
#include "whittle/session.h"

namespace whittle {
namespace {

TEST(Int8Attention, QuantizesTheActivationMatMulsOfAnExportedTransformer) {
  auto loaded = LoadModel(std::string(WHITTLE_SOURCE_DIR) + "/tests/corpus/patch_transformer_op17.onnx");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  const Graph original = *loaded;
  auto calib = MakeDataset(testing::RandomFloat({64, 1, 28, 28}, 1, 0.f, 1.f), Tensor(), "random");
  ASSERT_TRUE(calib.ok());
  PassContext ctx;
  ctx.calibration = &*calib;
  Graph g = original;
  auto r = testing::RunPass(g, "int8", "attention=1", ctx);
  ASSERT_TRUE(r.ok()) << r.status().message();
  int weights = 0, activations = 0, skipped = 0;
  for (const LayerReport& l : r->layers) {
    if (l.action == "skipped") ++skipped;
    else if (l.detail.find("activations x activations") != std::string::npos) ++activations;
    else ++weights;
  }
  EXPECT_EQ(weights, 10);
  EXPECT_EQ(activations, 4);
  EXPECT_EQ(skipped, 0);
  // Close to float: random weights make the logits of different classes close, so agreement is
  // checked on the logits themselves (relative to their spread).
  const Tensor x = testing::RandomFloat({32, 1, 28, 28}, 2, 0.f, 1.f);
  auto s0 = Session::FromGraph(original);
  ASSERT_TRUE(s0.ok());
  auto y0 = (*s0)->Run({{"input", x}});
  ASSERT_TRUE(y0.ok());
  double var = 0, mean = 0;
  const Tensor& f = (*y0)[0];
  for (int64_t i = 0; i < f.numel(); ++i) mean += f.data<float>()[i];
  mean /= static_cast<double>(f.numel());
  for (int64_t i = 0; i < f.numel(); ++i) var += (f.data<float>()[i] - mean) * (f.data<float>()[i] - mean);
  var /= static_cast<double>(f.numel());
  EXPECT_LT(testing::OutputMse(original, g, "input", x), 0.05 * var);
  // Refused where both inputs cannot get QDQ pairs.
  Graph h = original;
  EXPECT_FALSE(testing::RunPass(h, "int8", "attention=1,format=qoperator", ctx).ok());
}

}  // namespace
}  // namespace whittle
