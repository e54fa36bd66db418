// Issue 41's hostile models, as a sanitizer campaign found them (each one mutation of a real
// model): none may end the process. Each is refused with a one-line error that names what was
// wrong — through the Session API (a Status: ResourceExhausted or InvalidArgument) and through
// run-model (exit 1, one line on stderr), within a second, before any large allocation. Before
// this, Buffer::Allocate called abort() on the first two and the shape arithmetic of the next two
// overflowed (undefined behaviour, then a wrapped size and an abort).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "lib/ir/memory_meter.h"
#include "lib/onnx/model_io.h"
#include "lib/ops/op_def.h"
#include "tests/lib/onnx/test_models.h"
#include "tests/util/graph_builder.h"
#include "tests/util/infer_test_util.h"
#include "tests/util/run_command.h"
#include "tests/util/test_util.h"
#include "whittle/session.h"

namespace whittle {
namespace {

using testing::GraphBuilder;

constexpr int64_t k2e31 = int64_t{1} << 31;
constexpr int64_t k2e40 = int64_t{1} << 40;

std::string TempModel(const Graph& g, const std::string& name) {
  const std::string path = (std::filesystem::temp_directory_path() / ("whittle_hostile_" + name + ".onnx")).string();
  EXPECT_TRUE(SaveModel(g, path).ok());
  return path;
}

// run-model on the file: exit code 1, exactly one line on stderr containing `want`, in under a
// second (the refusal comes before any large allocation or computation).
void ExpectCliRefuses(const std::string& path, const std::string& args, const std::string& want) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = testing::RunCommand(std::string(WHITTLE_BINARY_DIR) + "/bin/run-model " + path + " " + args + " 2>&1");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << "not one line: " << r.out;
  EXPECT_NE(r.out.find(want), std::string::npos) << r.out;
  EXPECT_LT(s, 1.0) << r.out;
}

// x [1, 1, 28, 28] -> Conv 3x3 with `pads` -> y.
Graph ConvWithPads(const std::vector<int64_t>& pads) {
  return GraphBuilder(17)
      .Input("x", DType::kFloat32, {1, 1, 28, 28})
      .Init("w", testing::RandomFloat({1, 1, 3, 3}, 1))
      .Op("Conv", {"x", "w"}, {"y"}, testing::Attrs({{"pads", Attribute::Ints(pads)}}))
      .Output("y")
      .Build();
}

// ConstantOfShape of [2^40, 16]: a 64 TiB float output. With a budget it is refused before the
// allocation, naming the output and its size; without one the allocation fails and is an error
// too (no machine has 64 TiB), never an abort.
TEST(HostileModels, HugeActivationIsAnErrorWithAndWithoutABudget) {
  RegisterAllOps();
  const Graph g = GraphBuilder(17)
                      .Input("x", DType::kFloat32, {1})
                      .Init("shape", Tensor::FromVector<int64_t>({2}, {k2e40, 16}))
                      .Op("ConstantOfShape", {"shape"}, {"big"})
                      .Op("ReduceSum", {"big"}, {"s"}, testing::Attrs({{"keepdims", Attribute::Int(0)}}))
                      .Op("Add", {"x", "s"}, {"y"})
                      .Output("y")
                      .Build();
  for (int64_t budget : {int64_t{1} << 30, int64_t{0}}) {
    SCOPED_TRACE("budget " + std::to_string(budget));
    SessionOptions o;
    o.optimize = false;  // keep ConstantOfShape a node (folding would allocate it at load)
    o.max_memory_bytes = budget;
    auto s = Session::FromGraph(g, o);
    ASSERT_TRUE(s.ok()) << s.status().message();
    auto r = (*s)->Run({{"x", Tensor::FromVector<float>({1}, {1.f})}});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted) << r.status().message();
    EXPECT_NE(r.status().message().find("big"), std::string::npos) << r.status().message();
    if (budget) {
      EXPECT_NE(r.status().message().find("memory budget"), std::string::npos) << r.status().message();
    }
  }
}

// An image dim of 2^31 in the input (the mutation 28 -> 2^31): run-model --bench would have made
// a 16 GiB input; with a budget it says which input and how much.
TEST(HostileModels, HugeBenchInputIsRefusedByTheBudget) {
  RegisterAllOps();
  const Graph g = GraphBuilder(17)
                      .Input("x", DType::kFloat32, {Dim::Symbol("batch"), 2, k2e31})
                      .Op("Relu", {"x"}, {"y"})
                      .Output("y")
                      .Build();
  const std::string path = TempModel(g, "bench_input");
  ExpectCliRefuses(path, "--bench --batch 1 --max-memory 1G", "input 'x' of shape [1,2,2147483648] needs 16.0 GiB");
}

// Conv pads of 2^62 at both ends of a dim: their sum wraps. Refused at load, naming the dim.
// (Before, a pad of 2^62 also made a runtime rewrite, CropDeadConvTaps, walk 2^62 positions.)
TEST(HostileModels, OverflowingConvPadsAreRefusedAtLoad) {
  RegisterAllOps();
  const Graph g = ConvWithPads({int64_t{1} << 62, 0, int64_t{1} << 62, 0});
  auto s = Session::FromGraph(g);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("overflows"), std::string::npos) << s.status().message();
  ExpectCliRefuses(TempModel(g, "conv_pads"), "--bench --batch 1", "overflows");
}

// One pad of 2^62 fits the arithmetic: the output is [1, 1, 2^62, 2^62], refused at the run (and
// the load, whose rewrites look at the pads, takes no time).
TEST(HostileModels, HugeConvPadIsQuick) {
  RegisterAllOps();
  const Graph g = ConvWithPads({int64_t{1} << 62, int64_t{1} << 62, 0, 0});
  ExpectCliRefuses(TempModel(g, "conv_pad"), "--bench --batch 1", "too many");
}

// Conv pads of 2^40 fit the arithmetic but give a [1, 1, 2^41, 2^41] output: its element count
// passes 2^63, which the run refuses naming the output (the release build used to wrap it).
TEST(HostileModels, OutputPastTwoToTheSixtyThreeElementsIsAnError) {
  RegisterAllOps();
  const Graph g = ConvWithPads({k2e40, k2e40, k2e40, k2e40});
  SessionOptions o;
  o.optimize = false;
  auto s = Session::FromGraph(g, o);
  if (!s.ok()) {  // refusing it at load is as good
    EXPECT_NE(s.status().message().find("y"), std::string::npos) << s.status().message();
    return;
  }
  auto r = (*s)->Run({{"x", testing::RandomFloat({1, 1, 28, 28}, 2)}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("too many"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("Conv"), std::string::npos) << r.status().message();
}

// Split sizes summing past 2^63 ("sums to -9223372036854775807" before): refused at load.
TEST(HostileModels, SplitSizesThatOverflowAreRefused) {
  RegisterAllOps();
  const int64_t big = INT64_MAX / 2 + 1;
  const Graph g = GraphBuilder(17)
                      .Input("x", DType::kFloat32, {4})
                      .Init("split", Tensor::FromVector<int64_t>({2}, {big, big}))
                      .Op("Split", {"x", "split"}, {"a", "b"})
                      .Output("a")
                      .Output("b")
                      .Build();
  auto s = Session::FromGraph(g);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("sums past 2^63"), std::string::npos) << s.status().message();
}

// An initializer that declares [2^20, 2^20] floats (4 TiB) over 16 bytes of data: the loader
// refuses it without allocating.
TEST(HostileModels, InitializerDimsBeyondItsBytesAreRefusedByTheLoader) {
  onnx::ModelProto m = testing::SmallModel();
  onnx::TensorProto* t = m.mutable_graph()->add_initializer();
  t->set_name("huge");
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(int64_t{1} << 20);
  t->add_dims(int64_t{1} << 20);
  t->set_raw_data(std::string(16, '\0'));
  const auto t0 = std::chrono::steady_clock::now();
  auto g = ParseModel(m.SerializeAsString(), ".");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("huge"), std::string::npos) << g.status().message();
}

TEST(HostileModels, MaxMemoryFlagIsParsedAndChecked) {
  const std::string mlp = std::string(WHITTLE_SOURCE_DIR) + "/models/mlp.onnx";
  const auto bad = testing::RunCommand(std::string(WHITTLE_BINARY_DIR) + "/bin/run-model " + mlp +
                                       " --bench --batch 1 --max-memory lots 2>&1");
  EXPECT_EQ(bad.code, 1) << bad.out;
  EXPECT_NE(bad.out.find("--max-memory expects bytes or a size"), std::string::npos) << bad.out;
  // The MLP's weights (about 0.4 MB) pass a 1 KiB budget: refused at load, saying so.
  ExpectCliRefuses(mlp, "--bench --batch 1 --max-memory 1K", "the model's weights need");
  // And it runs within a realistic one.
  const auto ok = testing::RunCommand(std::string(WHITTLE_BINARY_DIR) + "/bin/run-model " + mlp +
                                      " --bench --batch 1 --warmup 1 --iterations 2 --min-time 0 --max-memory 64M 2>&1");
  EXPECT_EQ(ok.code, 0) << ok.out;
  EXPECT_GT(DefaultMemoryBudget(), 0);
}

}  // namespace
}  // namespace whittle
