// --svd ratio= on the bundled models: the sensitivity-driven allocation must meet the MAC
// target with a small accuracy cost before any fine-tuning (the acceptance figures:
// MLP ratio=0.5 halves MACs with <= 2 pp drop; CNN channel mode cuts >= 30 % of MACs).
#include <gtest/gtest.h>

#include "lib/data/dataset.h"
#include "lib/onnx/model_io.h"
#include "passes/accuracy_probe.h"
#include "passes/cost.h"
#include "tests/passes/svd/svd_test_util.h"

namespace whittle {
namespace {

struct Outcome {
  double macs_fraction = 0;  // result / original
  double acc_before = 0, acc_after = 0;
  PassReport report;
};

Outcome CompressAndEvaluate(const std::string& model, const std::string& spec) {
  Outcome o;
  auto g = LoadModel(std::string(WHITTLE_SOURCE_DIR) + "/models/" + model);
  EXPECT_TRUE(g.ok()) << g.status().message();
  if (!g.ok()) return o;
  auto calib = LoadDataset("fashion-mnist:train", 300);
  auto test = LoadDataset("fashion-mnist:test", 500);
  EXPECT_TRUE(calib.ok() && test.ok()) << calib.status().message() << test.status().message();
  if (!calib.ok() || !test.ok()) return o;
  const Graph orig = *g;
  PassContext ctx;
  ctx.calibration = &*calib;
  ctx.num_threads = 2;
  auto r = testing::RunSvd(*g, spec, ctx);
  EXPECT_TRUE(r.ok()) << r.status().message();
  if (!r.ok()) return o;
  o.report = *r;
  o.macs_fraction = static_cast<double>(ComputeCost(*g).macs) / static_cast<double>(ComputeCost(orig).macs);
  auto probe = AccuracyProbe::Make(orig, *test, 2);
  EXPECT_TRUE(probe.ok()) << probe.status().message();
  if (!probe.ok()) return o;
  o.acc_before = probe->baseline();
  auto acc = probe->Measure(*g);
  EXPECT_TRUE(acc.ok()) << acc.status().message();
  o.acc_after = acc.ok() ? *acc : 0;
  return o;
}

TEST(SvdModels, MlpRatioHalfHalvesMacsWithinTwoPoints) {
  Outcome o = CompressAndEvaluate("mlp.onnx", "ratio=0.5");
  EXPECT_LE(o.macs_fraction, 0.5);
  EXPECT_GE(o.acc_after, o.acc_before - 0.02) << "before " << o.acc_before << " after " << o.acc_after;
  ASSERT_FALSE(o.report.notes.empty());
  EXPECT_NE(o.report.notes[0].find("achieved"), std::string::npos) << o.report.notes[0];
  int factorized = 0;
  for (const LayerReport& l : o.report.layers) {
    if (l.action != "svd") continue;
    ++factorized;
    EXPECT_FALSE(l.sensitivity.empty()) << l.node;
    EXPECT_EQ(l.setting % 8, 0) << l.node;
    for (const SensitivityPoint& p : l.sensitivity) {
      EXPECT_GT(p.compression, 0) << l.node;
      EXPECT_LT(p.compression, 1) << l.node;
    }
  }
  EXPECT_GE(factorized, 1);
  std::printf("[ svd ] mlp ratio=0.5: MACs x%.3f, accuracy on 500 test samples %.4f -> %.4f\n", o.macs_fraction,
              o.acc_before, o.acc_after);
  for (const std::string& n : o.report.notes) std::printf("[ svd ]   %s\n", n.c_str());
  for (const LayerReport& l : o.report.layers)
    std::printf("[ svd ]   %s %s %s %s\n", l.node.c_str(), l.action.c_str(), l.detail.c_str(), l.reason.c_str());
}

TEST(SvdModels, CnnChannelRatioCutsAThirdOfMacs) {
  Outcome o = CompressAndEvaluate("cnn.onnx", "ratio=0.3,mode=channel");
  EXPECT_LE(o.macs_fraction, 0.7);
  bool conv_factorized = false;
  for (const LayerReport& l : o.report.layers) conv_factorized |= l.action == "svd-channel";
  EXPECT_TRUE(conv_factorized);
  std::printf("[ svd ] cnn ratio=0.3 channel: MACs x%.3f, accuracy on 500 test samples %.4f -> %.4f\n",
              o.macs_fraction, o.acc_before, o.acc_after);
  for (const std::string& n : o.report.notes) std::printf("[ svd ]   %s\n", n.c_str());
  for (const LayerReport& l : o.report.layers)
    std::printf("[ svd ]   %s %s %s %s\n", l.node.c_str(), l.action.c_str(), l.detail.c_str(), l.reason.c_str());
}

}  // namespace
}  // namespace whittle
