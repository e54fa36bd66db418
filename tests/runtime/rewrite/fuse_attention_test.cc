// Attention fusion (runtime/rewrite/fuse_attention.h): the patch transformers as PyTorch exports
// them (TorchScript at opsets 13 and 17; the head dim's scale computed at run time) run one
// ai.whittle Attention node per block, on the reference loops and the CPU tiles, with the outputs
// of the unfused graph; the bundled transformer too; an attention whose probabilities are read
// elsewhere stays unfused.
#include <gtest/gtest.h>

#include <string>

#include "lib/onnx/model_io.h"
#include "tests/util/graph_builder.h"
#include "tests/util/test_util.h"
#include "whittle/session.h"

namespace whittle {
namespace {

using testing::CountOps;
using testing::RandomFloat;

TEST(FuseAttention, ExportedPatchTransformersRunOneNodePerBlock) {
  for (const std::string file : {"tests/corpus/patch_transformer_op17.onnx", "tests/corpus/patch_transformer_op13.onnx",
                                 "models/transformer.onnx"}) {
    SCOPED_TRACE(file);
    auto loaded = LoadModel(std::string(WHITTLE_SOURCE_DIR) + "/" + file);
    ASSERT_TRUE(loaded.ok()) << loaded.status().message();
    const Graph& g = *loaded;
    auto s = Session::FromGraph(g);
    ASSERT_TRUE(s.ok()) << s.status().message();
    const Graph& run = (*s)->graph();
    EXPECT_EQ(CountOps(run, "Attention"), 2);
    EXPECT_EQ(CountOps(run, "Softmax"), 0);
    EXPECT_EQ(CountOps(run, "Split"), 0);
    const std::string input = g.value(g.inputs()[0]).name;
    for (int64_t batch : {1, 3}) testing::ExpectOptimizedMatchesUnoptimized(g, {{input, RandomFloat({batch, 1, 28, 28}, 5)}});
  }
}

TEST(FuseAttention, ProbabilitiesReadElsewhereStayUnfused) {
  auto loaded = LoadModel(std::string(WHITTLE_SOURCE_DIR) + "/tests/corpus/patch_transformer_op17.onnx");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  Graph g = *loaded;
  // Expose the first block's attention probabilities as a second output.
  int softmax_out = -1;
  for (const Node& n : g.nodes())
    if (n.op_type == "Softmax" && softmax_out < 0) softmax_out = n.outputs[0];
  ASSERT_GE(softmax_out, 0);
  g.outputs().push_back(softmax_out);
  auto s = Session::FromGraph(g);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(CountOps((*s)->graph(), "Attention"), 1);
  EXPECT_EQ(CountOps((*s)->graph(), "Softmax"), 1);
  testing::ExpectOptimizedMatchesUnoptimized(g, {{g.value(g.inputs()[0]).name, RandomFloat({2, 1, 28, 28}, 6)}});
}

}  // namespace
}  // namespace whittle
