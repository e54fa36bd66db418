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
#include <fstream>
#include <string>
#include <vector>

#include "lib/data/file_util.h"
#include "lib/data/npz.h"
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
void ExpectCliRefuses(const std::string& path, const std::string& args, const std::string& want,
                      const std::string& tool = "run-model") {
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = testing::RunCommand(std::string(WHITTLE_BINARY_DIR) + "/bin/" + tool + " " + path + " " + args + " 2>&1");
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
  ExpectCliRefuses(mlp, "--bench --batch 1 --max-memory 1K", "over the memory budget of 1.0 KiB");
  // And it runs within a realistic one.
  const auto ok = testing::RunCommand(std::string(WHITTLE_BINARY_DIR) + "/bin/run-model " + mlp +
                                      " --bench --batch 1 --warmup 1 --iterations 2 --min-time 0 --max-memory 64M 2>&1");
  EXPECT_EQ(ok.code, 0) << ok.out;
  EXPECT_GT(DefaultMemoryBudget(), 0);
}

// Every saved fuzz finding of the model targets (tests/fuzz/regressions/, found under ASan+UBSan
// by scripts/fuzz.sh) through the release run-model, with a time budget as a service would set
// for models it did not make (the DFT finding's O(N^2) sums take about 10 s without one): an exit
// code of 0 or 1, never a signal, and on an error exactly one line.
TEST(HostileModels, SavedFuzzFindingsEndInAnErrorOrARun) {
  int files = 0;
  for (const char* target : {"fuzz_model_load_run", "fuzz_passes"}) {
    const std::filesystem::path dir = std::filesystem::path(WHITTLE_SOURCE_DIR) / "tests/fuzz/regressions" / target;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      ++files;
      const auto r = testing::RunCommand(std::string(WHITTLE_BINARY_DIR) + "/bin/run-model " + e.path().string() +
                                         " --bench --batch 1 --warmup 0 --iterations 1 --min-time 0 --max-run-time 3s 2>&1");
      EXPECT_TRUE(r.code == 0 || r.code == 1) << e.path() << " exit " << r.code << ": " << r.out;
      if (r.code == 1) {
        EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << e.path() << ": not one line: " << r.out;
      }
    }
  }
  EXPECT_GE(files, 7);
}

// compress-model and finetune-model take --max-memory too, and hold every session they make (and
// the model they load) to it: nothing is written.
TEST(HostileModels, CompressAndFinetuneHoldToMaxMemory) {
  const std::string mlp = std::string(WHITTLE_SOURCE_DIR) + "/models/mlp.onnx";
  const std::string out = (std::filesystem::temp_directory_path() / "whittle_hostile_budget_out.onnx").string();
  std::filesystem::remove(out);
  ExpectCliRefuses(mlp, "-o " + out + " --int8 mode=dynamic --no-bench --max-memory 1K", "over the memory budget",
                   "compress-model");
  ExpectCliRefuses(mlp, "--teacher " + mlp + " --train-data fashion-mnist:train --train-limit 64 -o " + out +
                            " --max-memory 1K", "over the memory budget", "finetune-model");
  EXPECT_FALSE(std::filesystem::exists(out));
  const auto bad = testing::RunCommand(std::string(WHITTLE_BINARY_DIR) + "/bin/compress-model " + mlp + " -o " + out +
                                       " --int8 --max-memory 12X 2>&1");
  EXPECT_EQ(bad.code, 1) << bad.out;
  EXPECT_NE(bad.out.find("--max-memory expects bytes or a size"), std::string::npos) << bad.out;
}

// A real decompression bomb (tests/data/npz/zeros_bomb.npz: 64 MiB of zeros deflated to 65 kB,
// which deflate can produce, so the ratio check passes it) is held to the process's budget before
// anything is inflated; without a budget it reads.
TEST(HostileModels, NpzBombIsHeldToTheMemoryBudget) {
  auto bytes = ReadFileBytes(std::string(WHITTLE_SOURCE_DIR) + "/tests/data/npz/zeros_bomb.npz");
  ASSERT_TRUE(bytes.ok()) << bytes.status().message();
  struct Restore {
    int64_t was = ProcessMemoryBudget();
    ~Restore() { SetProcessMemoryBudget(was); }
  } restore;
  SetProcessMemoryBudget(int64_t{1} << 20);
  auto refused = ParseNpz(*bytes, "zeros_bomb.npz");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("'x.npy' would decompress to 64.0 MiB, over the memory budget of 1.0 MiB"),
            std::string::npos)
      << refused.status().message();
  SetProcessMemoryBudget(0);
  auto read = ParseNpz(*bytes, "zeros_bomb.npz");
  ASSERT_TRUE(read.ok()) << read.status().message();
  ASSERT_EQ(read->size(), 1u);
  EXPECT_EQ((*read)[0].tensor.numel(), 4096 * 4096);
}

// A model whose If nests `depth` deep (each then_branch holds the next If), written as protobuf
// bytes by hand: protobuf's own builders refuse to make messages nested this deep.
std::string NestedIfModel(int depth) {
  auto varint = [](uint64_t v) {
    std::string o;
    for (; v >= 0x80; v >>= 7) o.push_back(static_cast<char>((v & 0x7f) | 0x80));
    o.push_back(static_cast<char>(v));
    return o;
  };
  auto bytes_field = [&](int num, const std::string& payload) {
    return varint(static_cast<uint64_t>(num) << 3 | 2) + varint(payload.size()) + payload;
  };
  auto int_field = [&](int num, uint64_t v) { return varint(static_cast<uint64_t>(num) << 3) + varint(v); };
  auto value_info = [&](const std::string& name, int elem) {  // ValueInfoProto with a tensor type
    return bytes_field(1, name) + bytes_field(2, bytes_field(1, int_field(1, static_cast<uint64_t>(elem))));
  };
  const std::string leaf = bytes_field(2, "leaf") + bytes_field(12, value_info("y", 1));
  std::string g = leaf;
  for (int i = 0; i < depth; ++i) {
    const std::string then_attr = bytes_field(1, "then_branch") + int_field(20, 5) + bytes_field(6, g);
    const std::string else_attr = bytes_field(1, "else_branch") + int_field(20, 5) + bytes_field(6, leaf);
    const std::string node = bytes_field(1, "cond") + bytes_field(2, "y") + bytes_field(3, "if" + std::to_string(i)) +
                             bytes_field(4, "If") + bytes_field(5, then_attr) + bytes_field(5, else_attr);
    g = bytes_field(1, node) + bytes_field(2, "g" + std::to_string(i)) + bytes_field(11, value_info("cond", 9)) +
        bytes_field(12, value_info("y", 1));
  }
  return int_field(1, 8) + bytes_field(8, bytes_field(1, "") + int_field(2, 17)) + bytes_field(7, g);
}

// A 10,000-deep nested If (1.2 MB) is refused before protobuf's recursive parser sees it, quickly
// and naming the cause; a shallow one is read and reaches the graph checks, which refuse it: each
// leaf branch's output y is the enclosing If's own output (a branch may read outer values, but not
// what its own node makes), a cycle.
TEST(HostileModels, TenThousandDeepNestedIfIsRefusedQuickly) {
  const std::string deep = NestedIfModel(10000);
  const auto t0 = std::chrono::steady_clock::now();
  auto g = ParseModel(deep, ".");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("subgraphs nest more than 16 deep"), std::string::npos) << g.status().message();
  const std::string path = (std::filesystem::temp_directory_path() / "whittle_hostile_nested_if.onnx").string();
  std::ofstream(path, std::ios::binary) << deep;
  ExpectCliRefuses(path, "--bench --batch 1", "subgraphs nest more than 16 deep");
  ExpectCliRefuses(path, "-o " + path + ".out.onnx --int8 mode=dynamic", "subgraphs nest more than 16 deep", "compress-model");

  auto seventeen = ParseModel(NestedIfModel(17), ".");
  ASSERT_FALSE(seventeen.ok());
  EXPECT_NE(seventeen.status().message().find("subgraphs nest more than 16 deep"), std::string::npos)
      << seventeen.status().message();
  for (int depth : {1, 3, 16}) {
    auto shallow = ParseModel(NestedIfModel(depth), ".");
    ASSERT_FALSE(shallow.ok());
    EXPECT_NE(shallow.status().message().find("graph has a cycle through node 'if0' (If)"), std::string::npos)
        << depth << ": " << shallow.status().message();
  }
}

}  // namespace
}  // namespace whittle
