// The bundled models (models/) must reproduce, on Whittle's runtime, the test accuracy PyTorch
// measured (within 0.1 pp) and PyTorch's logits on the first 256 test images (within 1e-4).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "lib/data/dataset.h"
#include "lib/data/npy.h"
#include "runtime/evaluate.h"
#include "runtime/session_internal.h"
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

// The hand-built MLP/CNN (tests/data) carry the same weights as the torch exports, with the CNN's
// BatchNormalization as its own node: with the runtime's rewrites (Conv+BN folding, activation
// fusion) and without them, they give PyTorch's logits like the exported files do.
TEST(BundledHandBuilt, SameLogitsAsPyTorchWithAndWithoutTheRuntimeRewrites) {
  auto first = LoadDataset("fashion-mnist:test", 256);
  ASSERT_TRUE(first.ok());
  for (const std::string name : {"mlp", "cnn"}) {
    auto want = ReadNpy(std::string(WHITTLE_SOURCE_DIR) + "/models/" + name + "_logits_256.npy");
    ASSERT_TRUE(want.ok()) << want.status().message();
    for (bool optimize : {true, false}) {
      SCOPED_TRACE(name + (optimize ? " optimized" : " as written"));
      SessionOptions so;
      so.optimize = optimize;
      auto s = Session::Load(std::string(WHITTLE_SOURCE_DIR) + "/tests/data/" + name + "_handbuilt.onnx", so);
      ASSERT_TRUE(s.ok()) << s.status().message();
      if (name == "cnn") {
        int bn = 0;
        for (const Node& n : SessionGraph(**s).nodes()) bn += n.op_type == "BatchNormalization";
        EXPECT_EQ(bn, optimize ? 0 : 2);
      }
      auto got = (*s)->Run({{"image", first->inputs}});
      ASSERT_TRUE(got.ok()) << got.status().message();
      EXPECT_LE(testing::MaxAbsDiff((*got)[0], *want), 1e-4f);
    }
  }
}

}  // namespace
}  // namespace whittle
