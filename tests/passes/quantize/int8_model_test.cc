// --int8 on the bundled models with 300 calibration and 500 test samples: static per-channel
// QDQ must cost at most 1 pp of top-1 accuracy (the full test-set figure, <= 0.5 pp, is measured
// with compress-model and tests/tools/ort_int8_check.py) and shrink the weights >= 3.5x.
#include <gtest/gtest.h>

#include <cstdlib>

#include "lib/data/dataset.h"
#include "lib/onnx/model_io.h"
#include "passes/accuracy_probe.h"
#include "passes/cost.h"
#include "whittle/session.h"
#include "tests/passes/pass_test_util.h"

namespace whittle {
namespace {

// Top-1 accuracy with the runtime's rewrites off: Q/DQ run as float emulation, so this measures
// what the pass chose (ranges, scales), independent of the int8 kernels.
StatusOr<double> Accuracy(const Graph& g, const Dataset& data) {
  SessionOptions so;
  so.optimize = false;
  so.num_threads = 2;
  WH_ASSIGN_OR_RETURN(auto session, Session::FromGraph(g, so));
  WH_ASSIGN_OR_RETURN(Tensor top1, PredictTop1(*session, data.inputs));
  int64_t hit = 0;
  for (int64_t i = 0; i < data.size(); ++i) hit += top1.data<int64_t>()[i] == data.labels.data<int64_t>()[i];
  return static_cast<double>(hit) / static_cast<double>(data.size());
}

void CheckModel(const std::string& model, const std::string& spec) {
  auto g = LoadModel(std::string(WHITTLE_SOURCE_DIR) + "/models/" + model);
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto calib = LoadDataset("fashion-mnist:train", 300);
  auto test = LoadDataset("fashion-mnist:test", 500);
  ASSERT_TRUE(calib.ok() && test.ok());
  const Graph orig = *g;
  PassContext ctx;
  ctx.calibration = &*calib;
  ctx.num_threads = 2;
  auto r = testing::RunPass(*g, "int8", spec, ctx);
  ASSERT_TRUE(r.ok()) << r.status().message();
  for (const LayerReport& l : r->layers) EXPECT_EQ(l.action, "int8") << l.node << ": " << l.reason;
  auto before_or = Accuracy(orig, *test);
  auto acc = Accuracy(*g, *test);
  ASSERT_TRUE(before_or.ok() && acc.ok()) << (acc.ok() ? before_or.status().message() : acc.status().message());
  const double before = *before_or;
  if (std::getenv("WHITTLE_INT8_SAVE")) {  // for inspecting the emitted graph
    Status s = SaveModel(*g, std::string(std::getenv("WHITTLE_INT8_SAVE")) + "/" + model);
    EXPECT_TRUE(s.ok()) << s.message();
  }
  const double ratio = static_cast<double>(ComputeCost(orig).param_bytes) / static_cast<double>(ComputeCost(*g).param_bytes);
  std::printf("[ int8 ] %s '%s': accuracy on 500 test samples %.4f -> %.4f, weights %.2fx smaller\n", model.c_str(),
              spec.c_str(), before, *acc, ratio);
  EXPECT_GE(*acc, before - 0.01);
  EXPECT_GE(ratio, 3.5);
}

TEST(Int8Models, MlpStaticPerChannelWithinOnePoint) { CheckModel("mlp.onnx", ""); }
TEST(Int8Models, CnnStaticPerChannelWithinOnePoint) { CheckModel("cnn.onnx", ""); }

}  // namespace
}  // namespace whittle
