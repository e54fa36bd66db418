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
