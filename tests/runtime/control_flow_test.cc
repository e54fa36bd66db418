// If, Loop and Scan (issue 43): subgraphs as the loader reads them (outer values become the node's
// implicit inputs, outer constants the subgraph's own), as the saver writes them back (outer values
// by name, shared constants once), and as the runtime runs them (iterations within the run's time
// budget, empty scans, both scan directions). The exporters' files themselves are checked against
// ONNX Runtime by tests/tools/control_flow_check.py.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "lib/onnx/model_io.h"
#include "tests/util/graph_builder.h"
#include "tests/util/scratch_dir.h"
#include "tests/util/test_util.h"
#include "whittle/session.h"

namespace whittle {
namespace {

using testing::GraphBuilder;

std::string Corpus(const std::string& name) {
  return std::string(WHITTLE_SOURCE_DIR) + "/tests/corpus/control_flow/" + name;
}

std::vector<Tensor> RunOne(const Graph& g, const std::map<std::string, Tensor>& feeds, SessionOptions so = {}) {
  so.num_threads = 1;
  auto s = Session::FromGraph(g, so);
  EXPECT_TRUE(s.ok()) << s.status().message();
  if (!s.ok()) return {};
  auto r = (*s)->Run(feeds);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : std::vector<Tensor>{};
}

void ExpectSame(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t k = 0; k < a.size(); ++k) EXPECT_TRUE(a[k].BitwiseEquals(b[k])) << "output " << k;
}

const Node* FindOp(const Graph& g, const std::string& op) {
  for (const Node& n : g.nodes())
    if (n.op_type == op) return &n;
  return nullptr;
}

// TorchScript's If: both branches read the graph input x and weights of the main graph.
TEST(ControlFlow, ExportedIfReadsOuterValuesAndSavesThemByName) {
  auto g = LoadModel(Corpus("branchy_if_op17.onnx"));
  ASSERT_TRUE(g.ok()) << g.status().message();
  const Node* n = FindOp(*g, "If");
  ASSERT_NE(n, nullptr);
  // x is passed in; the weights became the branches' own initializers.
  ASSERT_EQ(n->implicit_inputs, 1);
  EXPECT_EQ(g->value(n->inputs[1]).name, "x");
  const Graph* then_g = n->attrs.GetGraph("then_branch");
  ASSERT_NE(then_g, nullptr);
  EXPECT_EQ(then_g->outer_inputs, 1);
  int weights = 0;
  for (const Value& v : then_g->values()) weights += v.is_constant() && v.initializer->rank() == 2;
  EXPECT_GE(weights, 1);

  for (const float sign : {1.f, -1.f}) {  // both branches
    Tensor x = testing::RandomFloat({2, 16}, 3, 0.1f, 1.f);
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] *= sign;
    const auto want = RunOne(*g, {{"x", x}});
    // The outer value renamed: the saved branches read it under its new name.
    Graph renamed = *g;
    renamed.value(renamed.FindValue("x")).name = "x_renamed";
    renamed.Reindex();
    testing::ScratchDir dir;
    const std::string path = dir.path() + "/if.onnx";
    ASSERT_TRUE(SaveModel(renamed, path).ok());
    auto back = LoadModel(path);
    ASSERT_TRUE(back.ok()) << back.status().message();
    const Node* bn = FindOp(*back, "If");
    ASSERT_NE(bn, nullptr);
    EXPECT_EQ(bn->explicit_inputs(), 1u);
    EXPECT_EQ(bn->implicit_inputs, 1);
    ExpectSame(RunOne(*back, {{"x_renamed", x}}), want);
  }
}

// Silero VAD (TorchScript, opset 15): both depth-1 branches and their nested Ifs read the main
// graph's LSTM weights. Saved again, each weight is written once, not once per reader.
TEST(ControlFlow, ConstantsSubgraphsShareAreWrittenOnce) {
  const std::string src = Corpus("silero_vad_16k_op15.onnx");
  auto g = LoadModel(src);
  ASSERT_TRUE(g.ok()) << g.status().message();
  testing::ScratchDir dir;
  const std::string path = dir.path() + "/vad.onnx";
  ASSERT_TRUE(SaveModel(*g, path).ok());
  const auto before = std::filesystem::file_size(src), after = std::filesystem::file_size(path);
  EXPECT_LT(after, before + before / 50) << before << " -> " << after;
  auto back = LoadModel(path);
  ASSERT_TRUE(back.ok()) << back.status().message();
  Tensor input = testing::RandomFloat({1, 576}, 5, -0.5f, 0.5f);
  Tensor state = testing::RandomFloat({2, 1, 128}, 6, -0.1f, 0.1f);
  const std::map<std::string, Tensor> feeds = {
      {"input", input}, {"state", state}, {"sr", Tensor::Scalar<int64_t>(16000)}};
  ExpectSame(RunOne(*back, feeds), RunOne(*g, feeds));
}

// Loop body: cond_out = Identity(cond_in); v_out = v_in + 1; scan = v_in * 2. The body reads
// `one` from the main graph (made by a node there, so it stays an outer input).
Graph CountingLoop(bool with_m) {
  GraphBuilder body(17);
  body.Input("i", DType::kInt64, {}).Input("c", DType::kBool, {}).Input("v", DType::kFloat32, {2});
  body.Input("one_outer", DType::kFloat32, {2});
  body.Init("two", Tensor::FromVector<float>({2}, {2.f, 2.f}));
  body.Op("Identity", {"c"}, {"c_out"}).Op("Add", {"v", "one_outer"}, {"v_out"}).Op("Mul", {"v", "two"}, {"s"});
  body.Output("c_out").Output("v_out").Output("s");
  Graph bg = body.Build();
  bg.outer_inputs = 1;

  GraphBuilder b(17);
  b.Input("v0", DType::kFloat32, {2}).Input("m", DType::kInt64, {}).Input("c0", DType::kBool, {});
  b.Init("half", Tensor::FromVector<float>({2}, {0.5f, 0.5f}));
  b.Op("Add", {"half", "half"}, {"one"});
  AttributeMap attrs;
  attrs.Set("body", Attribute::GraphValue(bg));
  b.Op("Loop", {with_m ? "m" : "", "c0", "v0", "one"}, {"v_final", "scan"}, attrs);
  b.Output("v_final").Output("scan");
  Graph g = b.Build();
  for (Node& n : g.nodes())
    if (n.op_type == "Loop") n.implicit_inputs = 1;
  return g;
}

std::map<std::string, Tensor> LoopFeeds(int64_t m, bool c) {
  Tensor cond(DType::kBool, {});
  cond.data<bool>()[0] = c;
  return {{"v0", Tensor::FromVector<float>({2}, {1.f, -1.f})}, {"m", Tensor::Scalar<int64_t>(m)}, {"c0", cond}};
}

TEST(ControlFlow, LoopCarriesValuesAndStacksScanOutputs) {
  const auto out = RunOne(CountingLoop(true), LoopFeeds(3, true));
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].dims(), (Dims{2}));
  EXPECT_FLOAT_EQ(out[0].data<float>()[0], 4.f);
  EXPECT_FLOAT_EQ(out[0].data<float>()[1], 2.f);
  ASSERT_EQ(out[1].dims(), (Dims{3, 2}));
  const float want[] = {2, -2, 4, 0, 6, 2};
  for (int k = 0; k < 6; ++k) EXPECT_FLOAT_EQ(out[1].data<float>()[k], want[k]) << k;
}

TEST(ControlFlow, LoopOfNoIterationGivesAnEmptyScanOutput) {
  for (const auto& feeds : {LoopFeeds(0, true), LoopFeeds(5, false)}) {
    const auto out = RunOne(CountingLoop(true), feeds);
    ASSERT_EQ(out.size(), 2u);
    EXPECT_FLOAT_EQ(out[0].data<float>()[0], 1.f);
    EXPECT_EQ(out[1].dims(), (Dims{0, 2}));
  }
}

// No trip count and a cond that never turns false: the run's time budget stops it.
TEST(ControlFlow, EndlessLoopStopsAtTheRunDeadline) {
  SessionOptions so;
  so.num_threads = 1;
  so.max_run_ms = 200;
  auto s = Session::FromGraph(CountingLoop(false), so);
  ASSERT_TRUE(s.ok()) << s.status().message();
  auto r = (*s)->Run(LoopFeeds(0, true));
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().code() == StatusCode::kDeadlineExceeded || r.status().code() == StatusCode::kResourceExhausted)
      << r.status().message();
  EXPECT_NE(r.status().message().find("Loop"), std::string::npos) << r.status().message();
}

// Scan 9: running sum over axis 1, input read backwards, output written backwards.
TEST(ControlFlow, ScanReadsAndWritesInBothDirections) {
  GraphBuilder body(17);
  body.Input("acc", DType::kFloat32, {2}).Input("x_t", DType::kFloat32, {2});
  body.Op("Add", {"acc", "x_t"}, {"acc_out"}).Op("Identity", {"acc_out"}, {"y_t"});
  body.Output("acc_out").Output("y_t");
  GraphBuilder b(17);
  b.Input("acc0", DType::kFloat32, {2}).Input("x", DType::kFloat32, {2, 3});
  AttributeMap attrs;
  attrs.Set("body", Attribute::GraphValue(body.Build()));
  attrs.Set("num_scan_inputs", Attribute::Int(1));
  attrs.Set("scan_input_axes", Attribute::Ints({1}));
  attrs.Set("scan_input_directions", Attribute::Ints({1}));
  attrs.Set("scan_output_directions", Attribute::Ints({1}));
  b.Op("Scan", {"acc0", "x"}, {"acc", "y"}, attrs).Output("acc").Output("y");
  const auto out = RunOne(b.Build(), {{"acc0", Tensor::FromVector<float>({2}, {0.f, 10.f})},
                                      {"x", Tensor::FromVector<float>({2, 3}, {1, 2, 3, 4, 5, 6})}});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_FLOAT_EQ(out[0].data<float>()[0], 6.f);
  EXPECT_FLOAT_EQ(out[0].data<float>()[1], 25.f);
  // Steps read x[:, 2], x[:, 1], x[:, 0]; step t is written at 2 - t: y[:, 0] is the last sum.
  ASSERT_EQ(out[1].dims(), (Dims{3, 2}));
  const float want[] = {6, 25, 5, 21, 3, 16};
  for (int k = 0; k < 6; ++k) EXPECT_FLOAT_EQ(out[1].data<float>()[k], want[k]) << k;
}

TEST(ControlFlow, MalformedBodiesAreRefusedWithAReason) {
  // The body passes fewer outer values than the node: the graph is inconsistent.
  Graph g = CountingLoop(true);
  for (Node& n : g.nodes())
    if (n.op_type == "Loop") n.implicit_inputs = 0;
  Status st = g.Verify();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("outer values"), std::string::npos) << st.message();
  // A Loop body without its iteration-number input.
  GraphBuilder body(17);
  body.Input("c", DType::kBool, {}).Input("v", DType::kFloat32, {2});
  body.Op("Identity", {"c"}, {"c_out"}).Op("Identity", {"v"}, {"v_out"}).Output("c_out").Output("v_out");
  GraphBuilder b(17);
  b.Input("v0", DType::kFloat32, {2});
  AttributeMap attrs;
  attrs.Set("body", Attribute::GraphValue(body.Build()));
  b.Op("Loop", {"", "", "v0"}, {"v"}, attrs).Output("v");
  auto s = Session::FromGraph(b.Build(), {});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("body has 2 inputs, expected 3"), std::string::npos) << s.status().message();
}

}  // namespace
}  // namespace whittle
