// Attention fusion (runtime/rewrite/fuse_attention.h): the patch transformers as PyTorch exports
// them (TorchScript at opsets 13 and 17; the head dim's scale computed at run time) run one
// ai.whittle Attention node per block, on the reference loops and the CPU tiles, with the outputs
// of the unfused graph; the bundled transformer too; with an additive mask before the softmax
// (a constant causal [N, N] one, or a [B, 1, 1, N] key-padding input); an attention whose
// probabilities are read elsewhere stays unfused.
#include <gtest/gtest.h>

#include <string>

#include "lib/onnx/model_io.h"
#include "runtime/session_internal.h"
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
    const Graph& run = SessionGraph(**s);
    EXPECT_EQ(CountOps(run, "Attention"), 2);
    EXPECT_EQ(CountOps(run, "Softmax"), 0);
    EXPECT_EQ(CountOps(run, "Split"), 0);
    const std::string input = g.value(g.inputs()[0]).name;
    for (int64_t batch : {1, 3}) testing::ExpectOptimizedMatchesUnoptimized(g, {{input, RandomFloat({batch, 1, 28, 28}, 5)}});
  }
}

// g with Add(scores, mask) inserted before every Softmax; returns the Add count.
int InsertMask(Graph& g, int mask) {
  std::vector<size_t> softmaxes;
  for (size_t i = 0; i < g.nodes().size(); ++i)
    if (g.nodes()[i].op_type == "Softmax") softmaxes.push_back(i);
  for (size_t i : softmaxes) {
    const int scores = g.nodes()[i].inputs[0];
    const int masked = g.AddValue(g.UniqueName("masked_scores"), DType::kFloat32);
    g.nodes()[i].inputs[0] = masked;
    Node add;
    add.name = g.UniqueName("mask_add");
    add.op_type = "Add";
    add.inputs = {scores, mask};
    add.outputs = {masked};
    g.AddNode(add);
  }
  return static_cast<int>(softmaxes.size());
}

TEST(FuseAttention, MaskAddedBeforeTheSoftmax) {
  auto loaded = LoadModel(std::string(WHITTLE_SOURCE_DIR) + "/tests/corpus/patch_transformer_op17.onnx");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  const std::string input = loaded->value(loaded->inputs()[0]).name;
  const Dim batch = (*loaded->value(loaded->inputs()[0]).shape)[0];
  // A causal mask (finite, as exporters write -inf-free masks) as a constant [16, 16].
  {
    Graph g = *loaded;
    Tensor causal(DType::kFloat32, {16, 16});
    for (int64_t i = 0; i < 16; ++i)
      for (int64_t j = 0; j < 16; ++j) causal.data<float>()[i * 16 + j] = j > i ? -1e4f : 0.f;
    ASSERT_EQ(InsertMask(g, g.AddInitializer("causal", causal)), 2);
    auto s = Session::FromGraph(g);
    ASSERT_TRUE(s.ok()) << s.status().message();
    EXPECT_EQ(CountOps(SessionGraph(**s), "Attention"), 2);
    EXPECT_EQ(CountOps(SessionGraph(**s), "Softmax"), 0);
    testing::ExpectOptimizedMatchesUnoptimized(g, {{input, RandomFloat({3, 1, 28, 28}, 7)}});
  }
  // A key-padding mask as a graph input [B, 1, 1, 16].
  {
    Graph g = *loaded;
    const int mask = g.AddValue("key_mask", DType::kFloat32, SymShape{batch, Dim(1), Dim(1), Dim(16)});
    g.inputs().push_back(mask);
    ASSERT_EQ(InsertMask(g, mask), 2);
    auto s = Session::FromGraph(g);
    ASSERT_TRUE(s.ok()) << s.status().message();
    EXPECT_EQ(CountOps(SessionGraph(**s), "Attention"), 2);
    Tensor m(DType::kFloat32, {2, 1, 1, 16});
    for (int64_t i = 0; i < 32; ++i) m.data<float>()[i] = (i % 16) >= 12 + (i / 16) ? -1e4f : 0.f;
    testing::ExpectOptimizedMatchesUnoptimized(g, {{input, RandomFloat({2, 1, 28, 28}, 8)}, {"key_mask", m}});
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
  EXPECT_EQ(CountOps(SessionGraph(**s), "Attention"), 1);
  EXPECT_EQ(CountOps(SessionGraph(**s), "Softmax"), 1);
  testing::ExpectOptimizedMatchesUnoptimized(g, {{g.value(g.inputs()[0]).name, RandomFloat({2, 1, 28, 28}, 6)}});
}

}  // namespace
}  // namespace whittle
