// PassOptions parsing, cost accounting and the PassManager's verify-after-every-pass contract.
#include <gtest/gtest.h>

#include "lib/ops/op_def.h"
#include "passes/cost.h"
#include "passes/pass_manager.h"
#include "passes/pass_options.h"
#include "tests/util/graph_builder.h"
#include "tests/util/test_util.h"

namespace whittle {
namespace {

TEST(PassOptions, ParsesKeysListsAndLayerOverrides) {
  auto o = PassOptions::Parse("prune", "ratio=0.3,exclude=fc1,fc2,criterion=l2,layer=conv1:ratio=0.5:round=1");
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_DOUBLE_EQ(*o->GetDouble("ratio", 0, 0, 1), 0.3);
  EXPECT_EQ(o->GetList("exclude"), (std::vector<std::string>{"fc1", "fc2"}));
  EXPECT_EQ(*o->GetChoice("criterion", "l1", {"l1", "l2"}), "l2");
  ASSERT_EQ(o->layers().count("conv1"), 1u);
  PassOptions& l = o->layers().at("conv1");
  EXPECT_DOUBLE_EQ(*l.GetDouble("ratio", 0, 0, 1), 0.5);
  EXPECT_FALSE(o->Finish().ok());  // layer key "round" never read
  EXPECT_EQ(*l.GetInt("round", 8, 1, 64), 1);
  EXPECT_TRUE(o->Finish().ok());
}

TEST(PassOptions, RejectsBadSpecs) {
  EXPECT_FALSE(PassOptions::Parse("svd", "rank").ok());
  EXPECT_FALSE(PassOptions::Parse("svd", "rank=").ok());
  EXPECT_FALSE(PassOptions::Parse("svd", "rank=1,,energy=2").ok());
  EXPECT_FALSE(PassOptions::Parse("svd", "rank=1,rank=2").ok());
  EXPECT_FALSE(PassOptions::Parse("svd", "layer=fc1").ok());
  auto o = PassOptions::Parse("svd", "energy=1.5,rank=abc,mode=diag,typo=1");
  ASSERT_TRUE(o.ok());
  EXPECT_NE(o->GetDouble("energy", 0, 0, 1).status().message().find("out of range"), std::string::npos);
  EXPECT_NE(o->GetInt("rank", 0, 1, 100).status().message().find("not an integer"), std::string::npos);
  EXPECT_NE(o->GetChoice("mode", "channel", {"channel", "spatial"}).status().message().find("channel|spatial"),
            std::string::npos);
  Status fin = o->Finish();
  EXPECT_NE(fin.message().find("unknown option 'typo'"), std::string::npos) << fin.message();
}

TEST(PassOptions, MergeLaterWins) {
  auto a = PassOptions::Parse("svd", "energy=0.9");
  auto b = PassOptions::Parse("svd", "energy=0.95,layer=fc1:rank=16");
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(a->Merge(*b).ok());
  EXPECT_DOUBLE_EQ(*a->GetDouble("energy", 0, 0, 1), 0.95);
  EXPECT_EQ(a->layers().count("fc1"), 1u);
}

Graph SmallNet() {
  testing::GraphBuilder b;
  b.Input("x", DType::kFloat32, {Dim::Symbol("batch"), 3, 8, 8});
  b.Init("w", testing::RandomFloat({4, 3, 3, 3}, 1));
  b.Init("b", testing::RandomFloat({4}, 2));
  AttributeMap pads;
  pads.Set("pads", Attribute::Ints({1, 1, 1, 1}));
  b.Op("Conv", {"x", "w", "b"}, {"c"}, pads);
  b.Op("Flatten", {"c"}, {"f"});
  b.Init("w2", testing::RandomFloat({256, 10}, 3));
  b.Op("MatMul", {"f", "w2"}, {"y"});
  b.Output("y");
  return b.Build();
}

TEST(Cost, CountsConvAndMatMulPerSample) {
  Graph g = SmallNet();
  ASSERT_TRUE(InferShapes(g).ok());
  GraphCost c = ComputeCost(g);
  EXPECT_EQ(c.macs, 8 * 8 * 4 * (3 * 3 * 3) + 256 * 10);
  EXPECT_EQ(c.params, 4 * 27 + 4 + 2560);
  EXPECT_EQ(c.param_bytes, 4 * c.params);
}

// A pass that breaks the graph (a node reading a value nobody produces).
class BreakingPass : public Pass {
 public:
  std::string name() const override { return "breaker"; }
  StatusOr<PassReport> Run(Graph& g, const PassContext&) override {
    int v = g.AddValue("dangling", DType::kFloat32);
    g.nodes()[0].inputs[0] = v;
    g.Reindex();
    return PassReport{};
  }
};

class CountingPass : public Pass {
 public:
  explicit CountingPass(int* n) : n_(n) {}
  std::string name() const override { return "counter"; }
  StatusOr<PassReport> Run(Graph&, const PassContext&) override {
    ++*n_;
    PassReport r;
    r.pass = "counter";
    return r;
  }
  int* n_;
};

TEST(PassManager, RejectsBrokenGraphAndKeepsInputUntouched) {
  Graph g = SmallNet();
  ASSERT_TRUE(InferShapes(g).ok());
  size_t nodes = g.nodes().size();
  PassManager pm;
  pm.Add(std::make_unique<BreakingPass>());
  auto r = pm.Run(&g, PassContext{});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("pass breaker"), std::string::npos) << r.status().message();
  EXPECT_EQ(g.nodes().size(), nodes);
  EXPECT_TRUE(g.Verify().ok());
}

TEST(PassManager, StopAfterRunsOnlyTheFirstPasses) {
  Graph g = SmallNet();
  ASSERT_TRUE(InferShapes(g).ok());
  int n = 0;
  PassManager pm;
  for (int i = 0; i < 3; ++i) pm.Add(std::make_unique<CountingPass>(&n));
  pm.set_stop_after(2);
  auto r = pm.Run(&g, PassContext{});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(n, 2);
  EXPECT_EQ(r->size(), 2u);
}

}  // namespace
}  // namespace whittle
