// A model whose batch is fixed (exported at batch 8) is evaluated and calibrated on any number of
// samples: the last, partial batch repeats its samples to the model's batch and only their rows
// of the outputs count (runtime/evaluate.h BatchFeeds).
#include <gtest/gtest.h>

#include "lib/data/dataset.h"
#include "lib/onnx/model_io.h"
#include "runtime/evaluate.h"
#include "tests/passes/pass_test_util.h"
#include "tests/util/test_util.h"
#include "whittle/session.h"

namespace whittle {
namespace {

Graph AtBatch(Graph g, int64_t batch) {
  for (int v : g.inputs()) (*g.value(v).shape)[0] = Dim(batch);
  for (int v : g.outputs()) (*g.value(v).shape)[0] = Dim(batch);
  return g;
}

TEST(FixedBatch, PartialLastBatchIsRepeatedAndTrimmed) {
  auto loaded = LoadModel(std::string(WHITTLE_SOURCE_DIR) + "/models/cnn.onnx");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  auto free_s = Session::FromGraph(*loaded);
  auto fixed_s = Session::FromGraph(AtBatch(*loaded, 8));
  ASSERT_TRUE(free_s.ok() && fixed_s.ok());
  ASSERT_EQ(FixedBatch((*fixed_s)->inputs()), 8);
  const Tensor x = testing::RandomFloat({21, 1, 28, 28}, 4, 0.f, 1.f);
  auto data = MakeDataset(x, Tensor(), "random");
  ASSERT_TRUE(data.ok());
  // Samples 16..20 fill a batch of 8 as 16..20, 16..18.
  auto feeds = BatchFeeds(*data, (*fixed_s)->inputs(), 16, 21);
  ASSERT_TRUE(feeds.ok()) << feeds.status().message();
  const Tensor& f = feeds->begin()->second;
  ASSERT_EQ(f.dim(0), 8);
  const int64_t row = 28 * 28;
  for (int64_t i = 0; i < 8; ++i)
    EXPECT_EQ(f.data<float>()[i * row + 5], x.data<float>()[(16 + i % 5) * row + 5]) << i;
  // Every sample gets the prediction the free-batch model gives it.
  auto want = PredictTop1(**free_s, *data, 256);
  auto got = PredictTop1(**fixed_s, *data, 256);
  ASSERT_TRUE(want.ok() && got.ok()) << got.status().message();
  ASSERT_EQ(got->numel(), 21);
  for (int64_t i = 0; i < 21; ++i) EXPECT_EQ(got->data<int64_t>()[i], want->data<int64_t>()[i]) << i;
  // int8 calibrates on the 21 samples in batches of 8.
  PassContext ctx;
  ctx.calibration = &*data;
  Graph g = AtBatch(*loaded, 8);
  auto r = testing::RunPass(g, "int8", "", ctx);
  EXPECT_TRUE(r.ok()) << r.status().message();
}

}  // namespace
}  // namespace whittle
