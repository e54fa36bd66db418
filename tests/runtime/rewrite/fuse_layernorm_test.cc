// LayerNorm fusion (runtime/rewrite/fuse_layernorm.h): the patch transformer exported by PyTorch at
// opset 13 (nn.LayerNorm written out as ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add) runs
// with one LayerNormalization node per norm and the unfused outputs; the Mul(d, d) square, a norm
// without scale and shift and ReduceMean's opset-18 axes input fuse too; a mean over another
// axis and a centred value read outside the pattern do not.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "lib/onnx/model_io.h"
#include "runtime/session_internal.h"
#include "tests/util/graph_builder.h"
#include "tests/util/test_util.h"
#include "whittle/session.h"

namespace whittle {
namespace {

using testing::GraphBuilder;
using testing::RandomFloat;

TEST(FuseLayerNorm, TorchOpset13TransformerRunsOneNodePerNorm) {
  auto loaded = LoadModel(std::string(WHITTLE_SOURCE_DIR) + "/tests/corpus/patch_transformer_op13.onnx");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  const Graph& g = *loaded;
  ASSERT_EQ(testing::CountOps(g, "Sqrt"), 5);
  auto s = Session::FromGraph(g);
  ASSERT_TRUE(s.ok()) << s.status().message();
  const Graph& run = SessionGraph(**s);
  EXPECT_EQ(testing::CountOps(run, "LayerNormalization"), 5);
  EXPECT_EQ(testing::CountOps(run, "Sqrt"), 0);
  // The Pow computing a shape (of the head dim, a static dim picked out of a Shape) folds at load.
  EXPECT_EQ(testing::CountOps(run, "Pow"), 0);
  EXPECT_EQ(testing::CountOps(run, "Sub"), 0);
  testing::ExpectOptimizedMatchesUnoptimized(g, {{"input", RandomFloat({3, 1, 28, 28}, 4)}});
}

// x [2, 5, 8] -> LayerNorm written out with the given square and tail -> y.
Graph WrittenOut(bool mul_square, bool affine, bool axes_input, int64_t axis, bool centred_is_output) {
  GraphBuilder gb(axes_input ? 18 : 13);
  gb.Input("x", DType::kFloat32, {2, 5, 8})
      .Init("eps", Tensor::FromVector<float>({}, {1e-5f}))
      .Init("two", Tensor::FromVector<float>({}, {2.f}))
      .Init("gamma", RandomFloat({8}, 1))
      .Init("beta", RandomFloat({8}, 2))
      .Init("axes", Tensor::FromVector<int64_t>({1}, {axis}));
  AttributeMap mean_attrs;
  if (!axes_input) mean_attrs.Set("axes", Attribute::Ints({axis}));
  const std::vector<std::string> m_in = axes_input ? std::vector<std::string>{"x", "axes"} : std::vector<std::string>{"x"};
  gb.Op("ReduceMean", m_in, {"m"}, mean_attrs).Op("Sub", {"x", "m"}, {"d"});
  if (mul_square) gb.Op("Mul", {"d", "d"}, {"sq"});
  else gb.Op("Pow", {"d", "two"}, {"sq"});
  const std::vector<std::string> v_in =
      axes_input ? std::vector<std::string>{"sq", "axes"} : std::vector<std::string>{"sq"};
  gb.Op("ReduceMean", v_in, {"v"}, mean_attrs)
      .Op("Add", {"v", "eps"}, {"ve"})
      .Op("Sqrt", {"ve"}, {"sd"})
      .Op("Div", {"d", "sd"}, {affine ? "n" : "y"});
  if (affine) gb.Op("Mul", {"gamma", "n"}, {"s"}).Op("Add", {"s", "beta"}, {"y"});
  gb.Output("y");
  if (centred_is_output) gb.Output("d");
  return gb.Build();
}

TEST(FuseLayerNorm, VariantsFuse) {
  for (bool mul_square : {false, true}) {
    for (bool affine : {false, true}) {
      for (bool axes_input : {false, true}) {
        SCOPED_TRACE(std::string(mul_square ? "Mul(d, d)" : "Pow(d, 2)") + (affine ? " affine" : "") +
                     (axes_input ? " axes input" : ""));
        const Graph g = WrittenOut(mul_square, affine, axes_input, -1, false);
        auto s = Session::FromGraph(g);
        ASSERT_TRUE(s.ok()) << s.status().message();
        EXPECT_EQ(testing::CountOps(SessionGraph(**s), "LayerNormalization"), 1);
        EXPECT_EQ(testing::CountOps(SessionGraph(**s), "ReduceMean"), 0);
        testing::ExpectOptimizedMatchesUnoptimized(g, {{"x", RandomFloat({2, 5, 8}, 7)}});
      }
    }
  }
}

TEST(FuseLayerNorm, LeavesOtherMeansAlone) {
  // A mean over the middle axis is not a layer norm over the last.
  const Graph middle = WrittenOut(false, true, false, 1, false);
  // The centred value is also a graph output.
  const Graph shared = WrittenOut(false, true, false, -1, true);
  for (const Graph* g : std::vector<const Graph*>{&middle, &shared}) {
    auto s = Session::FromGraph(*g);
    ASSERT_TRUE(s.ok()) << s.status().message();
    EXPECT_EQ(testing::CountOps(SessionGraph(**s), "LayerNormalization"), 0);
    testing::ExpectOptimizedMatchesUnoptimized(*g, {{"x", RandomFloat({2, 5, 8}, 8)}});
  }
}

}  // namespace
}  // namespace whittle
