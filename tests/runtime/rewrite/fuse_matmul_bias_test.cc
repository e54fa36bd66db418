// MatMul + bias fusion (runtime/rewrite/fuse_matmul_bias.h): a Linear layer as PyTorch exports it
// on 3-D inputs (MatMul with a constant [K, N] weight, then Add of a constant [N] bias, then Relu)
// runs as one MatMul with the bias and the activation in its epilogue, on the packed-weight and
// the Sgemm paths, with the unfused result; biases that are not one value per column, weights
// computed at run time and products read twice stay apart.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "kernels/cpu/packed_gemm.h"
#include "runtime/session_internal.h"
#include "tests/util/graph_builder.h"
#include "tests/util/test_util.h"
#include "whittle/session.h"

namespace whittle {
namespace {

using testing::GraphBuilder;
using testing::RandomFloat;

Graph Linear(const Dims& bias_dims, bool relu) {
  GraphBuilder gb(17);
  gb.Input("x", DType::kFloat32, {Dim::Symbol("batch"), 5, 24})
      .Init("w", RandomFloat({24, 40}, 1))
      .Init("b", RandomFloat(bias_dims, 2))
      .Op("MatMul", {"x", "w"}, {"h"})
      .Op("Add", {"b", "h"}, {relu ? "s" : "y"});
  if (relu) gb.Op("Relu", {"s"}, {"y"});
  return gb.Output("y").Build();
}

TEST(FuseMatMulBias, LinearLayerRunsAsOneMatMulOnBothGemmPaths) {
  for (const Dims& bd : std::vector<Dims>{{40}, {1, 40}, {1, 1, 40}}) {
    for (bool relu : {false, true}) {
      SCOPED_TRACE("bias " + DimsToString(bd) + (relu ? " relu" : ""));
      const Graph g = Linear(bd, relu);
      auto s = Session::FromGraph(g);
      ASSERT_TRUE(s.ok()) << s.status().message();
      const Graph& run = SessionGraph(**s);
      EXPECT_EQ(testing::CountOps(run, "Add"), 0);
      EXPECT_EQ(testing::CountOps(run, "Relu"), 0);
      ASSERT_EQ(testing::CountOps(run, "MatMul"), 1);
      for (const Node& n : run.nodes()) {
        if (n.op_type != "MatMul") continue;
        ASSERT_EQ(n.inputs.size(), 3u);
        EXPECT_EQ(run.value(n.inputs[2]).name, "b");
        EXPECT_EQ(n.attrs.GetString("_activation", ""), relu ? "Relu" : "");
      }
      for (cpu::PackedGemmUse use : {cpu::PackedGemmUse::kAlways, cpu::PackedGemmUse::kNever}) {
        cpu::SetPackedGemmUse(use);
        testing::ExpectOptimizedMatchesUnoptimized(g, {{"x", RandomFloat({3, 5, 24}, 9)}});
        testing::ExpectOptimizedMatchesUnoptimized(g, {{"x", RandomFloat({70, 5, 24}, 10)}});  // 350 rows: past the packed rule's M
      }
      cpu::SetPackedGemmUse(cpu::PackedGemmUse::kAuto);
    }
  }
}

TEST(FuseMatMulBias, LeavesOtherAddsAlone) {
  // A [5, 40] addend varies per row: not a bias.
  const Graph per_row = Linear({5, 40}, false);
  // The product is also a graph output.
  Graph shared = GraphBuilder(17)
                     .Input("x", DType::kFloat32, {2, 5, 24})
                     .Init("w", RandomFloat({24, 40}, 1))
                     .Init("b", RandomFloat({40}, 2))
                     .Op("MatMul", {"x", "w"}, {"h"})
                     .Op("Add", {"h", "b"}, {"y"})
                     .Output("y")
                     .Output("h")
                     .Build();
  // The weight is an input (computed at run time).
  Graph dynamic = GraphBuilder(17)
                      .Input("x", DType::kFloat32, {2, 5, 24})
                      .Input("w", DType::kFloat32, {24, 40})
                      .Init("b", RandomFloat({40}, 2))
                      .Op("MatMul", {"x", "w"}, {"h"})
                      .Op("Add", {"h", "b"}, {"y"})
                      .Output("y")
                      .Build();
  for (const Graph* g : std::vector<const Graph*>{&per_row, &shared, &dynamic}) {
    auto s = Session::FromGraph(*g);
    ASSERT_TRUE(s.ok()) << s.status().message();
    EXPECT_EQ(testing::CountOps(SessionGraph(**s), "Add"), 1);
    for (const Node& n : SessionGraph(**s).nodes()) EXPECT_LE(n.inputs.size(), 2u) << n.op_type;
  }
  testing::ExpectOptimizedMatchesUnoptimized(per_row, {{"x", RandomFloat({2, 5, 24}, 5)}});
}

}  // namespace
}  // namespace whittle
