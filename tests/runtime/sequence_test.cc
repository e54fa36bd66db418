// Sequence and optional values: as the loader reads their types (graph inputs, Optional's `type`
// attribute), as the saver writes them back, as Session::Run takes and returns them (Tensor::Sequence,
// Tensor::NoValue), and the errors a bad feed or a bad position gets. The ops' results are checked
// against ONNX's own test data (onnx_conformance: the Sequence*, Optional*, SequenceMap, If and Loop
// cases) and exporters' files against ONNX Runtime (tests/tools/control_flow_check.py).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lib/onnx/model_io.h"
#include "tests/util/graph_builder.h"
#include "tests/util/scratch_dir.h"
#include "whittle/session.h"

namespace whittle {
namespace {

using testing::GraphBuilder;

const char* kData = "/usr/share/libonnx-testdata/data/node/";

std::string Case(const std::string& name) { return std::string(kData) + name + "/model.onnx"; }

Tensor Floats(const Dims& d, float start) {
  std::vector<float> v(static_cast<size_t>(NumElements(d)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = start + static_cast<float>(i);
  return Tensor::FromVector<float>(d, v);
}

// ONNX's loop16_seq_none: an optional sequence (fed without a value) carried by a Loop whose body
// tests it (OptionalHasElement, an If) and appends to it. Saved and read back, it keeps its kinds,
// and runs the same.
TEST(Sequences, OptionalSequenceThroughALoopSavesAndRunsTheSame) {
  auto g = LoadModel(Case("test_loop16_seq_none"));
  ASSERT_TRUE(g.ok()) << g.status().message();
  const Value& opt = g->value(g->FindValue("opt_seq"));
  EXPECT_EQ(opt.kind, ValueKind::kOptionalSequence);
  EXPECT_EQ(opt.dtype, DType::kFloat32);
  testing::ScratchDir dir;
  const std::string path = dir.path() + "/loop.onnx";
  ASSERT_TRUE(SaveModel(*g, path).ok());
  ASSERT_TRUE(CheckModelWithOnnxChecker(path).ok());
  auto back = LoadModel(path);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->value(back->FindValue("opt_seq")).kind, ValueKind::kOptionalSequence);
  const std::map<std::string, Tensor> feeds = {{"trip_count", Tensor::Scalar<int64_t>(4)},
                                               {"cond", Tensor::Scalar<bool>(true)},
                                               {"opt_seq", Tensor::NoValue()}};
  std::vector<Tensor> outs[2];
  int k = 0;
  for (const Graph* graph : {&*g, &*back}) {
    auto s = Session::FromGraph(*graph);
    ASSERT_TRUE(s.ok()) << s.status().message();
    EXPECT_EQ((*s)->inputs()[2].kind, ValueKind::kOptionalSequence);
    EXPECT_EQ((*s)->outputs()[0].kind, ValueKind::kSequence);
    auto r = (*s)->Run(feeds);
    ASSERT_TRUE(r.ok()) << r.status().message();
    outs[k++] = *r;
  }
  ASSERT_TRUE(outs[0][0].is_sequence());
  // The If's then-branch starts the list with [0]; each of the 4 iterations appends x[:i+1].
  ASSERT_EQ(outs[0][0].elements().size(), 5u);
  EXPECT_EQ(outs[0][0].elements()[4].dims(), (Dims{4}));
  EXPECT_TRUE(outs[0][0].BitwiseEquals(outs[1][0]));
  // Fed with a value, the loop appends to it instead.
  auto s = Session::FromGraph(*g);
  ASSERT_TRUE(s.ok());
  auto fed = feeds;
  fed["opt_seq"] = Tensor::Sequence(DType::kFloat32, {Floats({2}, 7.f)});
  auto r = (*s)->Run(fed);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ((*r)[0].elements().size(), 5u);
  EXPECT_EQ((*r)[0].elements()[0].data<float>()[1], 8.f);
}

// Optional's `type` attribute (a TypeProto) is read and written back.
TEST(Sequences, OptionalTypeAttributeRoundTrips) {
  auto g = LoadModel(Case("test_if_opt"));
  ASSERT_TRUE(g.ok()) << g.status().message();
  testing::ScratchDir dir;
  const std::string path = dir.path() + "/if_opt.onnx";
  ASSERT_TRUE(SaveModel(*g, path).ok());
  ASSERT_TRUE(CheckModelWithOnnxChecker(path).ok());
  auto back = LoadModel(path);
  ASSERT_TRUE(back.ok()) << back.status().message();
  const Graph* then_g = nullptr;
  for (const Node& n : back->nodes())
    if (n.op_type == "If") then_g = n.attrs.GetGraph("then_branch");
  ASSERT_NE(then_g, nullptr);
  const Attribute* type = then_g->nodes()[0].attrs.Find("type");
  ASSERT_NE(type, nullptr);
  EXPECT_EQ(type->type_kind, ValueKind::kSequence);
  EXPECT_EQ(type->type_dtype, DType::kFloat32);
  auto s = Session::FromGraph(*back);
  ASSERT_TRUE(s.ok()) << s.status().message();
  auto none = (*s)->Run({{"cond", Tensor::Scalar<bool>(true)}});
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_TRUE((*none)[0].is_no_value());
  auto some = (*s)->Run({{"cond", Tensor::Scalar<bool>(false)}});
  ASSERT_TRUE(some.ok()) << some.status().message();
  ASSERT_TRUE((*some)[0].is_sequence());
  EXPECT_EQ((*some)[0].elements().size(), 1u);
}

// A graph of the sequence ops with a sequence input: what a bad feed and a bad position get.
Graph SequenceGraph() {
  AttributeMap concat;
  concat.Set("axis", Attribute::Int(0));
  Graph g = GraphBuilder(17)
                .Input("seq", DType::kFloat32, {})
                .Input("pos", DType::kInt64, {})
                .Op("SequenceAt", {"seq", "pos"}, {"item"})
                .Op("SequenceLength", {"seq"}, {"len"})
                .Op("ConcatFromSequence", {"seq"}, {"joined"}, concat)
                .Output("item")
                .Output("len")
                .Output("joined")
                .Build();
  Value& seq = g.value(g.FindValue("seq"));
  seq.kind = ValueKind::kSequence;
  seq.shape.reset();
  return g;
}

TEST(Sequences, SequenceOpsRunAndRefuseBadFeeds) {
  auto s = Session::FromGraph(SequenceGraph());
  ASSERT_TRUE(s.ok()) << s.status().message();
  const Tensor seq = Tensor::Sequence(DType::kFloat32, {Floats({1, 3}, 0.f), Floats({2, 3}, 10.f)});
  auto r = (*s)->Run({{"seq", seq}, {"pos", Tensor::Scalar<int64_t>(-1)}});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ((*r)[0].dims(), (Dims{2, 3}));
  EXPECT_EQ((*r)[1].data<int64_t>()[0], 2);
  EXPECT_EQ((*r)[2].dims(), (Dims{3, 3}));
  EXPECT_EQ((*r)[2].data<float>()[3], 10.f);

  auto out_of_range = (*s)->Run({{"seq", seq}, {"pos", Tensor::Scalar<int64_t>(2)}});
  ASSERT_FALSE(out_of_range.ok());
  EXPECT_NE(out_of_range.status().message().find("position 2 is out of range for a sequence of 2"), std::string::npos)
      << out_of_range.status().message();

  auto tensor_fed = (*s)->Run({{"seq", Floats({2, 3}, 0.f)}, {"pos", Tensor::Scalar<int64_t>(0)}});
  ASSERT_FALSE(tensor_fed.ok());
  EXPECT_NE(tensor_fed.status().message().find("input 'seq' is a sequence, got a tensor"), std::string::npos)
      << tensor_fed.status().message();

  auto wrong_type = (*s)->Run({{"seq", Tensor::Sequence(DType::kInt64, {Tensor::Scalar<int64_t>(1)})},
                               {"pos", Tensor::Scalar<int64_t>(0)}});
  ASSERT_FALSE(wrong_type.ok());
  EXPECT_NE(wrong_type.status().message().find("holds float32, got int64"), std::string::npos)
      << wrong_type.status().message();

  auto ragged = (*s)->Run({{"seq", Tensor::Sequence(DType::kFloat32, {Floats({1, 3}, 0.f), Floats({1, 2}, 0.f)})},
                           {"pos", Tensor::Scalar<int64_t>(0)}});
  ASSERT_FALSE(ragged.ok());
  EXPECT_NE(ragged.status().message().find("they differ off the concatenation axis"), std::string::npos)
      << ragged.status().message();

  auto empty = (*s)->Run({{"seq", Tensor::Sequence(DType::kFloat32, {})}, {"pos", Tensor::Scalar<int64_t>(0)}});
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("out of range for a sequence of 0"), std::string::npos)
      << empty.status().message();
}

// RunInto writes tensors only: a sequence output is refused with its name, nothing written.
TEST(Sequences, RunIntoRefusesASequenceOutput) {
  Graph g = GraphBuilder(17).Input("x", DType::kFloat32, {Dim(2)}).Op("SequenceConstruct", {"x", "x"}, {"s"}).Output("s").Build();
  auto s = Session::FromGraph(g);
  ASSERT_TRUE(s.ok()) << s.status().message();
  std::vector<Tensor> into = {Tensor(DType::kFloat32, {2})};
  Status st = (*s)->RunInto({{"x", Floats({2}, 1.f)}}, into);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("output 's' is a sequence or an optional"), std::string::npos) << st.message();
  auto r = (*s)->Run({{"x", Floats({2}, 1.f)}});
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_TRUE((*r)[0].is_sequence());
  EXPECT_EQ((*r)[0].elements().size(), 2u);
}

}  // namespace
}  // namespace whittle
