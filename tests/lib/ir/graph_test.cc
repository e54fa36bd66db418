// Graph::AddOp: the node appender the lowerings and training liftings share.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "lib/ir/graph.h"
#include "tests/util/graph_builder.h"

namespace whittle {
namespace {

TEST(Graph, AddOpNamesNodesAndOutputsUniquely) {
  Graph g = ::whittle::testing::GraphBuilder(13)
                .Input("x", DType::kFloat32, {2, 3})
                .Op("Relu", {"x"}, {"layer/Mul"})  // a value already holds the name
                .Output("layer/Mul")
                .Build();
  g.nodes()[0].name = "layer/Mul_1";  // and a node the first fallback
  const int x = g.FindValue("x");
  const int a = g.AddOp("layer/Mul", "Mul", {x, x});
  const int b = g.AddOp("layer/Mul", "Mul", {a, x}, AttributeMap(), "ai.whittle");
  std::set<std::string> names;
  for (const Node& n : g.nodes()) EXPECT_TRUE(names.insert(n.name).second) << "two nodes named " << n.name;
  EXPECT_EQ(g.nodes()[1].name, "layer/Mul_2");
  EXPECT_EQ(g.nodes()[2].name, "layer/Mul_3");
  EXPECT_EQ(g.nodes()[2].domain, "ai.whittle");
  EXPECT_EQ(g.value(b).producer, 2);
  EXPECT_EQ(g.nodes()[2].inputs, (std::vector<int>{a, x}));
  EXPECT_NE(g.value(a).name, g.value(b).name);
}

}  // namespace
}  // namespace whittle
