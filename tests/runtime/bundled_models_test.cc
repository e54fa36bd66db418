// The bundled models (models/) must reproduce, on Whittle's runtime, the test accuracy PyTorch
// measured (within 0.1 pp) and PyTorch's logits on the first 256 test images (within 1e-4).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "lib/data/dataset.h"
#include "lib/data/npy.h"
#include "runtime/evaluate.h"
#include "whittle/session.h"
#include "tests/util/test_util.h"

namespace whittle {
namespace {

class BundledModelTest : public ::testing::TestWithParam<std::string> {};

TEST_P(BundledModelTest, ReproducesPyTorchAccuracyAndLogits) {
  const std::string dir = std::string(WHITTLE_SOURCE_DIR) + "/models/";
  std::ifstream f(dir + "models.json");
  ASSERT_TRUE(f.good()) << "models/models.json missing";
  nlohmann::json meta = nlohmann::json::parse(f);
  const std::string name = GetParam();
  ASSERT_TRUE(meta.contains(name));
  const double expected = meta[name]["accuracy"].get<double>();

  SessionOptions so;
  so.num_threads = 2;
  auto s = Session::Load(dir + meta[name]["file"].get<std::string>(), so);
  ASSERT_TRUE(s.ok()) << s.status().message();
  auto ds = LoadDataset("fashion-mnist:test");
  ASSERT_TRUE(ds.ok()) << ds.status().message();
  ASSERT_EQ(ds->inputs.dim(0), 10000);
  auto r = EvaluateTop1(**s, ds->inputs, ds->labels, 500);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_NEAR(r->accuracy, expected, 0.001) << name << ": Whittle " << r->accuracy << " vs PyTorch " << expected;

  auto want = ReadNpy(dir + name + "_logits_256.npy");
  ASSERT_TRUE(want.ok()) << want.status().message();
  auto first = LoadDataset("fashion-mnist:test", 256);
  ASSERT_TRUE(first.ok());
  auto got = (*s)->Run({{(*s)->inputs()[0].name, first->inputs}});
  ASSERT_TRUE(got.ok()) << got.status().message();
  ASSERT_EQ((*got)[0].dims(), want->dims());
  EXPECT_LE(testing::MaxAbsDiff((*got)[0], *want), 1e-4f);
}

INSTANTIATE_TEST_SUITE_P(Models, BundledModelTest, ::testing::Values("mlp", "cnn", "transformer", "resnet"));

}  // namespace
}  // namespace whittle
