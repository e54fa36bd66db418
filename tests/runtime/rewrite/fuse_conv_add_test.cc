// Residual fusion (runtime/rewrite/fuse_conv_add.h): Conv -> Add(residual) [-> Relu] runs as one
// Conv with the residual as its fourth input, on every Conv path, with the unfused result; Adds
// that broadcast, convs read elsewhere and convs with an activation before the Add stay apart.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "kernels/cpu/conv.h"
#include "runtime/rewrite/match.h"
#include "runtime/session_internal.h"
#include "tests/util/graph_builder.h"
#include "tests/util/test_util.h"
#include "whittle/session.h"

namespace whittle {
namespace {

using testing::GraphBuilder;
using testing::RandomFloat;

AttributeMap Pads1() {
  AttributeMap a;
  a.Set("pads", Attribute::Ints({1, 1, 1, 1}));
  return a;
}

// x [batch, 8, 10, 10] -> Conv+Relu -> Conv -> Add(., x or the Conv's input) -> Relu -> y.
Graph ResidualBlock(bool swap_add_operands, bool with_bias) {
  GraphBuilder gb(17);
  gb.Input("x", DType::kFloat32, {Dim::Symbol("batch"), 8, 10, 10})
      .Init("w1", RandomFloat({8, 8, 3, 3}, 1, -0.3f, 0.3f))
      .Init("b1", RandomFloat({8}, 2))
      .Init("w2", RandomFloat({8, 8, 3, 3}, 3, -0.3f, 0.3f))
      .Init("b2", RandomFloat({8}, 4))
      .Op("Conv", {"x", "w1", "b1"}, {"c1"}, Pads1())
      .Op("Relu", {"c1"}, {"r1"});
  if (with_bias) gb.Op("Conv", {"r1", "w2", "b2"}, {"c2"}, Pads1());
  else gb.Op("Conv", {"r1", "w2"}, {"c2"}, Pads1());
  if (swap_add_operands) gb.Op("Add", {"x", "c2"}, {"s"});
  else gb.Op("Add", {"c2", "x"}, {"s"});
  return gb.Op("Relu", {"s"}, {"y"}).Output("y").Build();
}

TEST(FuseConvAdd, ResidualBlockRunsAsTwoConvsOnEveryPath) {
  for (bool swap : {false, true}) {
    for (bool bias : {true, false}) {
      SCOPED_TRACE(std::string(swap ? "Add(x, conv)" : "Add(conv, x)") + (bias ? " with bias" : " no bias"));
      const Graph g = ResidualBlock(swap, bias);
      SessionOptions nchw;  // the fused graph as such, before the blocked layout
      nchw.blocked_layout = false;
      auto s = Session::FromGraph(g, nchw);
      ASSERT_TRUE(s.ok()) << s.status().message();
      const Graph& run = SessionGraph(**s);
      EXPECT_EQ(testing::CountOps(run, "Add"), 0);
      EXPECT_EQ(testing::CountOps(run, "Relu"), 0);
      ASSERT_EQ(testing::CountOps(run, "Conv"), 2);
      const Node* producer = rewrite::Producer(run, run.outputs()[0]);
      ASSERT_NE(producer, nullptr);
      const Node& last = *producer;
      ASSERT_EQ(last.inputs.size(), 4u);
      EXPECT_EQ(run.value(last.inputs[3]).name, "x");
      EXPECT_EQ(last.attrs.GetString("_activation", ""), "Relu");
      for (cpu::ConvPath path :
           {cpu::ConvPath::kOwn, cpu::ConvPath::kDirect, cpu::ConvPath::kOneDnn, cpu::ConvPath::kAuto}) {
        cpu::SetConvPath(path);
        SCOPED_TRACE(static_cast<int>(path));
        testing::ExpectOptimizedMatchesUnoptimized(g, {{"x", RandomFloat({3, 8, 10, 10}, 9)}});
        testing::ExpectOptimizedMatchesUnoptimized(g, {{"x", RandomFloat({1, 8, 10, 10}, 10)}});
      }
      cpu::SetConvPath(cpu::ConvPath::kAuto);
    }
  }
}

TEST(FuseConvAdd, LeavesOtherAddsAlone) {
  // A per-channel Add broadcasts: not the same shape as the conv output. (Being a constant, it
  // goes into the conv's bias instead: fold_into_conv.h.)
  Graph bcast = GraphBuilder(17)
                    .Input("x", DType::kFloat32, {2, 4, 6, 6})
                    .Init("w", RandomFloat({4, 4, 3, 3}, 1))
                    .Init("shift", RandomFloat({4, 1, 1}, 2))
                    .Op("Conv", {"x", "w"}, {"c"}, Pads1())
                    .Op("Add", {"c", "shift"}, {"y"})
                    .Output("y")
                    .Build();
  // The conv output is also a graph output (read outside the Add).
  Graph shared = GraphBuilder(17)
                     .Input("x", DType::kFloat32, {2, 4, 6, 6})
                     .Init("w", RandomFloat({4, 4, 3, 3}, 1))
                     .Op("Conv", {"x", "w"}, {"c"}, Pads1())
                     .Op("Add", {"c", "x"}, {"y"})
                     .Output("y")
                     .Output("c")
                     .Build();
  // Relu between Conv and Add: fusing the Add would move it before the activation.
  Graph act_first = GraphBuilder(17)
                        .Input("x", DType::kFloat32, {2, 4, 6, 6})
                        .Init("w", RandomFloat({4, 4, 3, 3}, 1))
                        .Op("Conv", {"x", "w"}, {"c"}, Pads1())
                        .Op("Relu", {"c"}, {"r"})
                        .Op("Add", {"r", "x"}, {"y"})
                        .Output("y")
                        .Build();
  for (const Graph* g : {&bcast, &shared, &act_first}) {
    SessionOptions nchw;
    nchw.blocked_layout = false;
    auto s = Session::FromGraph(*g, nchw);
    ASSERT_TRUE(s.ok()) << s.status().message();
    EXPECT_EQ(testing::CountOps(SessionGraph(**s), "Add"), g == &bcast ? 0 : 1);
    for (const Node& n : SessionGraph(**s).nodes()) {
      if (g != &bcast || n.op_type != "Conv") continue;
      EXPECT_EQ(n.inputs.size(), 3u) << "the shift is the conv's bias";
    }
    for (const Node& n : SessionGraph(**s).nodes()) EXPECT_LE(n.inputs.size(), 3u) << n.op_type;
    testing::ExpectOptimizedMatchesUnoptimized(*g, {{"x", RandomFloat({2, 4, 6, 6}, 5)}});
  }
}

}  // namespace
}  // namespace whittle
