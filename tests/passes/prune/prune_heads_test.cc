// --prune on multi-head attention: whole heads go (their Q/K/V columns, the output projection's
// rows, the head count in the split and merge Reshapes), and the result equals the original model
// with those heads' rows of the output projection zeroed.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "lib/onnx/model_io.h"
#include "passes/cost.h"
#include "tests/passes/pass_test_util.h"
#include "tests/util/graph_builder.h"
#include "tests/util/test_util.h"
#include "whittle/session.h"

namespace whittle {
namespace {

using testing::GraphBuilder;
using testing::RandomFloat;

Tensor Int64s(std::vector<int64_t> v) {
  Tensor t(DType::kInt64, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.data<int64_t>()[i] = v[i];
  return t;
}

AttributeMap Perm(std::vector<int64_t> p) {
  AttributeMap a;
  a.Set("perm", Attribute::Ints(std::move(p)));
  return a;
}

// x[N,4,8] -> MatMul(wq) -> Reshape [0,0,2,4] -> Transpose: q = k = v [N,2 heads,4,4] ->
// Softmax(q kᵀ over `softmax_axis`) v -> Transpose -> Reshape [0,0,8] -> MatMul(wo) -> y[N,4,3].
Graph TinyAttention(int64_t softmax_axis) {
  AttributeMap sm;
  sm.Set("axis", Attribute::Int(softmax_axis));
  Graph g = GraphBuilder(17)
                .Input("x", DType::kFloat32, {Dim::Symbol("N"), 4, 8})
                .Init("wq", RandomFloat({8, 8}, 1))
                .Init("split_shape", Int64s({0, 0, 2, 4}))
                .Init("merge_shape", Int64s({0, 0, 8}))
                .Init("wo", RandomFloat({8, 3}, 2))
                .Op("MatMul", {"x", "wq"}, {"p"})
                .Op("Reshape", {"p", "split_shape"}, {"r"})
                .Op("Transpose", {"r"}, {"t"}, Perm({0, 2, 1, 3}))
                .Op("Transpose", {"t"}, {"tk"}, Perm({0, 1, 3, 2}))
                .Op("MatMul", {"t", "tk"}, {"s"})
                .Op("Softmax", {"s"}, {"a"}, sm)
                .Op("MatMul", {"a", "t"}, {"o"})
                .Op("Transpose", {"o"}, {"ot"}, Perm({0, 2, 1, 3}))
                .Op("Reshape", {"ot", "merge_shape"}, {"m"})
                .Op("MatMul", {"m", "wo"}, {"y"})
                .Output("y")
                .Build();
  g.nodes()[0].name = "proj";
  g.nodes()[9].name = "out";
  WH_CHECK(InferShapes(g).ok());
  return g;
}

const Tensor& Weight(const Graph& g, const std::string& node) {
  for (const Node& n : g.nodes())
    if (n.name == node) return *g.ConstInput(n, 1);
  WH_CHECK(false);
  return *g.ConstInput(g.nodes()[0], 1);
}

// The original with the output projection's rows of every head whose rows the pruned model no
// longer has set to zero. Heads are matched by comparing row blocks.
Graph ZeroRemovedHeads(const Graph& original, const Graph& pruned, const std::string& out_proj, int64_t head_dim,
                       int64_t* removed) {
  Graph ref = original;
  const Tensor& w0 = Weight(original, out_proj);
  const Tensor& w1 = Weight(pruned, out_proj);
  const int64_t cols = w0.dim(1), heads = w0.dim(0) / head_dim, kept = w1.dim(0) / head_dim;
  std::set<int64_t> keep;
  for (int64_t k = 0; k < kept; ++k)
    for (int64_t h = 0; h < heads; ++h) {
      bool same = true;
      for (int64_t i = 0; i < head_dim * cols && same; ++i)
        same = w0.data<float>()[h * head_dim * cols + i] == w1.data<float>()[k * head_dim * cols + i];
      if (same) keep.insert(h);
    }
  WH_CHECK(static_cast<int64_t>(keep.size()) == kept);
  for (Node& n : ref.nodes()) {
    if (n.name != out_proj) continue;
    Tensor& w = *ref.value(n.inputs[1]).initializer;
    for (int64_t h = 0; h < heads; ++h)
      if (!keep.count(h))
        for (int64_t i = 0; i < head_dim * cols; ++i) w.data<float>()[h * head_dim * cols + i] = 0.f;
  }
  *removed = heads - kept;
  return ref;
}

double MaxRelDiff(const Graph& a, const Graph& b, const std::string& input, const Tensor& x) {
  auto sa = Session::FromGraph(a);
  auto sb = Session::FromGraph(b);
  WH_CHECK(sa.ok() && sb.ok());
  auto ya = (*sa)->Run({{input, x}});
  auto yb = (*sb)->Run({{input, x}});
  WH_CHECK(ya.ok() && yb.ok());
  double diff = 0, scale = 1e-6;
  for (int64_t i = 0; i < (*ya)[0].numel(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>((*ya)[0].data<float>()[i]) - (*yb)[0].data<float>()[i]));
    scale = std::max(scale, std::fabs(static_cast<double>((*ya)[0].data<float>()[i])));
  }
  return diff / scale;
}

TEST(PruneHeads, TinyAttentionLosesWholeHeadsExactly) {
  const Graph original = TinyAttention(-1);
  Graph g = original;
  auto r = testing::RunPass(g, "prune", "ratio=0,heads=0.5,compensate=0");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Weight(g, "proj").dims(), (Dims{8, 4}));
  EXPECT_EQ(Weight(g, "out").dims(), (Dims{4, 3}));
  bool reported = false;
  for (const LayerReport& l : r->layers) reported |= l.node == "proj" && l.detail == "kept 1 of 2 attention heads";
  EXPECT_TRUE(reported);
  int64_t removed = 0;
  const Graph ref = ZeroRemovedHeads(original, g, "out", 4, &removed);
  EXPECT_EQ(removed, 1);
  EXPECT_LT(MaxRelDiff(ref, g, "x", RandomFloat({3, 4, 8}, 5)), 1e-5);
}

TEST(PruneHeads, SoftmaxAcrossHeadsKeepsThemWithTheReason) {
  Graph g = TinyAttention(1);  // normalizes over the head axis: heads are not independent
  auto r = testing::RunPass(g, "prune", "ratio=0,heads=0.5,compensate=0");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Weight(g, "proj").dims(), (Dims{8, 8}));
  bool reason = false;
  for (const LayerReport& l : r->layers)
    reason |= l.node == "proj" && l.action == "skipped" &&
              l.reason.find("attention heads cannot be removed") != std::string::npos &&
              l.reason.find("normalizes across heads") != std::string::npos;
  EXPECT_TRUE(reason);
}

// PyTorch-exported patch transformers (width 32, fused Q/K/V, 4 heads of 8): the TorchScript exporter
// picks q/k/v with Split + Squeeze, the dynamo exporter with Slice; shapes are computed with
// Shape -> Gather -> Concat.
TEST(PruneHeads, ExportedTransformersLoseHalfTheirHeadsExactly) {
  for (const std::string file : {"patch_transformer_op17.onnx", "patch_transformer_op18_dynamo.onnx"}) {
    SCOPED_TRACE(file);
    auto loaded = LoadModel(std::string(WHITTLE_SOURCE_DIR) + "/tests/corpus/" + file);
    ASSERT_TRUE(loaded.ok()) << loaded.status().message();
    const Graph original = *loaded;
    Graph g = original;
    auto r = testing::RunPass(g, "prune", "ratio=0,heads=0.5,compensate=0");
    ASSERT_TRUE(r.ok()) << r.status().message();
    int pruned = 0;
    for (const LayerReport& l : r->layers) pruned += l.detail == "kept 2 of 4 attention heads";
    EXPECT_EQ(pruned, 2);
    // The output projections are the MatMuls whose weights lost rows.
    Graph ref = original;
    int projections = 0;
    for (const Node& n : g.nodes()) {
      if (n.op_type != "MatMul" || !g.ConstInput(n, 1)) continue;
      const Tensor& w = *g.ConstInput(n, 1);
      if (w.dim(0) == Weight(original, n.name).dim(0)) continue;
      ++projections;
      EXPECT_EQ(w.dim(0), 16);
      int64_t removed = 0;
      ref = ZeroRemovedHeads(ref, g, n.name, 8, &removed);
      EXPECT_EQ(removed, 2);
    }
    EXPECT_EQ(projections, 2);
    EXPECT_LT(MaxRelDiff(ref, g, original.value(original.inputs()[0]).name, RandomFloat({5, 1, 28, 28}, 3, 0.f, 1.f)),
              1e-5);
  }
}

// Hugging Face's BERT (transformers 5, TorchScript export) computes its head reshapes' targets:
// view(*input_shape, -1, head_dim) is Concat(Shape(x)[0], Shape(x)[1], -1, head_dim), and the
// attention mask [batch, 1, seq, seq] comes out of Range/Expand/Where, so static inference knows
// none of those dims. With the dims one sample shows (ObserveShapes, as compress-model runs it),
// the heads go all the same, and the rewritten model equals the original with those heads zeroed
// at other batch and sequence sizes than the observed one.
TEST(PruneHeads, HuggingFaceBertLosesHalfItsHeadsExactly) {
  auto loaded = LoadModel(std::string(WHITTLE_SOURCE_DIR) + "/tests/corpus/hf_bert_ids_mask_op17.onnx");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  Graph original = *loaded;
  ASSERT_TRUE(InferShapes(original).ok());
  auto feeds = [](int64_t n, int64_t len, uint32_t seed) {
    Tensor ids(DType::kInt64, {n, len}), mask(DType::kInt64, {n, len});
    for (int64_t i = 0; i < n * len; ++i) {
      ids.data<int64_t>()[i] = 1 + (seed * 7919u + static_cast<uint32_t>(i) * 104729u) % 199;
      mask.data<int64_t>()[i] = i % len < len - (i / len) % 3 ? 1 : 0;  // some padding
    }
    return std::map<std::string, Tensor>{{"input_ids", ids}, {"attention_mask", mask}};
  };
  ASSERT_TRUE(ObserveShapes(original, feeds(1, 16, 1)).ok());
  Graph g = original;
  auto r = testing::RunPass(g, "prune", "ratio=0,heads=0.5,compensate=0");
  ASSERT_TRUE(r.ok()) << r.status().message();
  int pruned = 0;
  for (const LayerReport& l : r->layers) {
    pruned += l.detail.rfind("kept 2 of 4 attention heads", 0) == 0;
    // Per-layer MACs from the weights, not from the dims observed before the pass.
    if (l.node.find("/query/") != std::string::npos || l.node.find("attention/output/dense") != std::string::npos) {
      EXPECT_EQ(l.macs_after * 2, l.macs_before) << l.node;
    }
  }
  EXPECT_EQ(pruned, 6);  // Q, K and V of both layers
  Graph ref = original;
  int projections = 0;
  for (const Node& n : g.nodes()) {
    if (n.op_type != "MatMul" || !g.ConstInput(n, 1) || n.name.find("attention/output") == std::string::npos) continue;
    ++projections;
    EXPECT_EQ(g.ConstInput(n, 1)->dim(0), 16) << n.name;
    int64_t removed = 0;
    ref = ZeroRemovedHeads(ref, g, n.name, 8, &removed);
    EXPECT_EQ(removed, 2);
  }
  EXPECT_EQ(projections, 2);
  auto sr = Session::FromGraph(ref);
  auto sg = Session::FromGraph(g);
  ASSERT_TRUE(sr.ok() && sg.ok());
  for (auto [n, len] : {std::pair<int64_t, int64_t>{3, 11}, {2, 16}}) {
    auto f = feeds(n, len, 5);
    auto yr = (*sr)->Run(f);
    auto yg = (*sg)->Run(f);
    ASSERT_TRUE(yr.ok() && yg.ok()) << (yg.ok() ? yr.status().message() : yg.status().message());
    ASSERT_EQ((*yg)[0].dims(), (Dims{n, 3}));
    for (int64_t i = 0; i < (*yr)[0].numel(); ++i)
      EXPECT_NEAR((*yg)[0].data<float>()[i], (*yr)[0].data<float>()[i], 1e-4) << n << "x" << len << " " << i;
  }
}

}  // namespace
}  // namespace whittle
