// MatMul + bias fusion (runtime/rewrite/fuse_matmul_bias.h): a Linear layer as PyTorch exports it
// on 3-D inputs (MatMul with a constant [K, N] weight, then Add of a constant [N] bias, then Relu)
// runs as one MatMul with the bias and the activation in its epilogue, on the packed-weight and
// the Sgemm paths, with the unfused result; biases that are not one value per column, weights
// computed at run time and products read twice stay apart.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "kernels/cpu/packed_gemm.h"
#include "tests/util/graph_builder.h"
#include "tests/util/test_util.h"
#include "whittle/session.h"

namespace whittle {
namespace {

using testing::GraphBuilder;
using testing::RandomFloat;

int Count(const Graph& g, const std::string& op) {
  int n = 0;
  for (const Node& node : g.nodes()) n += node.op_type == op;
  return n;
}

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

void ExpectSameAsUnoptimized(const Graph& g, const Tensor& x) {
  SessionOptions plain;
  plain.optimize = false;
  plain.backend = Backend::kReference;
  auto ref = Session::FromGraph(g, plain);
  ASSERT_TRUE(ref.ok()) << ref.status().message();
  auto want = (*ref)->Run({{"x", x}});
  ASSERT_TRUE(want.ok()) << want.status().message();
  for (Backend backend : {Backend::kReference, Backend::kCpu}) {
    SessionOptions so;
    so.backend = backend;
    so.num_threads = 2;
    auto s = Session::FromGraph(g, so);
    ASSERT_TRUE(s.ok()) << s.status().message();
    auto got = (*s)->Run({{"x", x}});
    ASSERT_TRUE(got.ok()) << got.status().message();
    const Tensor& a = (*got)[0];
    const Tensor& e = (*want)[0];
    ASSERT_EQ(a.dims(), e.dims());
    for (int64_t i = 0; i < a.numel(); ++i)
      ASSERT_NEAR(a.data<float>()[i], e.data<float>()[i], 1e-4f + 1e-4f * std::fabs(e.data<float>()[i]))
          << BackendName(backend) << " element " << i;
  }
}

TEST(FuseMatMulBias, LinearLayerRunsAsOneMatMulOnBothGemmPaths) {
  for (const Dims& bd : std::vector<Dims>{{40}, {1, 40}, {1, 1, 40}}) {
    for (bool relu : {false, true}) {
      SCOPED_TRACE("bias " + DimsToString(bd) + (relu ? " relu" : ""));
      const Graph g = Linear(bd, relu);
      auto s = Session::FromGraph(g);
      ASSERT_TRUE(s.ok()) << s.status().message();
      const Graph& run = (*s)->graph();
      EXPECT_EQ(Count(run, "Add"), 0);
      EXPECT_EQ(Count(run, "Relu"), 0);
      ASSERT_EQ(Count(run, "MatMul"), 1);
      for (const Node& n : run.nodes()) {
        if (n.op_type != "MatMul") continue;
        ASSERT_EQ(n.inputs.size(), 3u);
        EXPECT_EQ(run.value(n.inputs[2]).name, "b");
        EXPECT_EQ(n.attrs.GetString("_activation", ""), relu ? "Relu" : "");
      }
      for (cpu::PackedGemmUse use : {cpu::PackedGemmUse::kAlways, cpu::PackedGemmUse::kNever}) {
        cpu::SetPackedGemmUse(use);
        ExpectSameAsUnoptimized(g, RandomFloat({3, 5, 24}, 9));
        ExpectSameAsUnoptimized(g, RandomFloat({70, 5, 24}, 10));  // 350 rows: past the packed rule's M
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
    EXPECT_EQ(Count((*s)->graph(), "Add"), 1);
    for (const Node& n : (*s)->graph().nodes()) EXPECT_LE(n.inputs.size(), 2u) << n.op_type;
  }
  ExpectSameAsUnoptimized(per_row, RandomFloat({2, 5, 24}, 5));
}

}  // namespace
}  // namespace whittle
