// exclude= / layer= as every pass reads them: parsing, the exclusion test, and the name check
// against a model (all names, or only nodes of given op types).
#include <gtest/gtest.h>

#include "lib/onnx/model_io.h"
#include "passes/layer_selection.h"

namespace whittle {
namespace {

Graph Mlp() {
  auto g = LoadModel(std::string(WHITTLE_SOURCE_DIR) + "/models/mlp.onnx");
  EXPECT_TRUE(g.ok()) << g.status().message();
  return std::move(g).value();
}

LayerSelection Parse(const std::string& spec) {
  auto o = PassOptions::Parse("svd", spec);
  EXPECT_TRUE(o.ok()) << o.status().message();
  auto s = LayerSelection::Parse(*o);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return std::move(s).value();
}

TEST(LayerSelection, ParsesExcludeListAndLayerNames) {
  LayerSelection s = Parse("exclude=/fc1/Gemm,/fc3/Gemm,layer=/fc2/Gemm:rank=4");
  EXPECT_EQ(s.exclude(), (std::vector<std::string>{"/fc1/Gemm", "/fc3/Gemm"}));
  EXPECT_TRUE(s.excluded("/fc1/Gemm"));
  EXPECT_TRUE(s.excluded("/fc3/Gemm"));
  EXPECT_FALSE(s.excluded("/fc2/Gemm"));
  EXPECT_TRUE(s.Check(Mlp()).ok());
}

TEST(LayerSelection, EmptyNamesNeverReachAPass) {
  // The spec parser refuses them first ("exclude=" has no value, ",," is a stray comma).
  EXPECT_FALSE(PassOptions::Parse("prune", "exclude=").ok());
  EXPECT_FALSE(PassOptions::Parse("prune", "exclude=a,,b").ok());
}

TEST(LayerSelection, UnknownNamesAreAllNamed) {
  Status st = Parse("exclude=/fc1/Gemm,nosuch,layer=other:rank=2").Check(Mlp());
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "--svd: no node named 'nosuch' (exclude=), 'other' (layer=) in the model");
}

TEST(LayerSelection, OpTypeRestrictionListsTheCandidates) {
  Graph g = Mlp();
  std::string relu;
  for (const Node& n : g.nodes())
    if (n.op_type == "Relu") relu = n.name;
  ASSERT_FALSE(relu.empty());
  // A node that exists but is not of an allowed type is refused, and the message lists the ones that are.
  Status st = Parse("exclude=" + relu).Check(g, {"Gemm", "MatMul", "Conv"});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("no Conv/Gemm/MatMul node named '" + relu + "' (exclude=)"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("'/fc1/Gemm', '/fc2/Gemm', '/fc3/Gemm'"), std::string::npos) << st.message();
  EXPECT_TRUE(Parse("exclude=" + relu).Check(g).ok());
}

}  // namespace
}  // namespace whittle

namespace whittle {
namespace {

// layer=NAME:skip=1 is read here for every pass that takes it, and left unread (so the pass's
// Finish() calls it an unknown option) for the ones that do not.
TEST(LayerSelection, SkipIsReadOnceWhereAPassTakesIt) {
  auto o = PassOptions::Parse("cluster", "exclude=a,layer=b:skip=1,layer=c:k=4,layer=d:skip=0");
  ASSERT_TRUE(o.ok()) << o.status().message();
  auto s = LayerSelection::Parse(*o, LayerSelection::Skip::kAllowed);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_TRUE(s->skipped("b"));
  EXPECT_FALSE(s->skipped("c"));
  EXPECT_FALSE(s->skipped("d"));
  EXPECT_EQ(s->LeftAloneReason("a"), "excluded by exclude=");
  EXPECT_EQ(s->LeftAloneReason("b"), "skip=1 for this layer");
  EXPECT_EQ(s->LeftAloneReason("c"), "");
  auto bad = PassOptions::Parse("svd", "layer=b:skip=2");
  ASSERT_TRUE(bad.ok());
  auto refused = LayerSelection::Parse(*bad, LayerSelection::Skip::kAllowed);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("skip=2 is out of range"), std::string::npos) << refused.status().message();
  auto prune = PassOptions::Parse("prune", "layer=b:skip=1");
  ASSERT_TRUE(prune.ok());
  auto p = LayerSelection::Parse(*prune);
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->skipped("b"));
  Status st = prune->Finish();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("unknown option 'skip'"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace whittle
