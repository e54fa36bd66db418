// The session's device placement on a stand-in device: a DeviceRuntime for kCuda whose memory is
// host memory (it counts copies and remembers what it allocated), and a test op whose kernel
// claims that device when the session asks for the CUDA backend and refuses any tensor that is
// not on it. Standard ops have no kernel for the stand-in (the CUDA kernels build only against the
// real CUDA runtime), so they fall back to the CPU: the test sees the placement, the explicit
// copies at each device boundary, the constants uploaded once at load, aliases staying on the
// device, the fallback list and the profile — in every build, GPU or not. The CUDA kernels
// themselves are tested by tests/kernels (ExpectBackendsMatchReference) where a GPU exists.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "kernels/kernel.h"
#include "lib/ir/device.h"
#include "lib/ops/op_def.h"
#include "runtime/session_internal.h"
#include "tests/util/device_test_ops.h"
#include "tests/util/fake_device.h"
#include "tests/util/graph_builder.h"
#include "tests/util/infer_test_util.h"
#include "tests/util/test_util.h"
#include "whittle/session.h"

namespace whittle {
namespace {

using testing::Attrs;
using testing::GraphBuilder;
using testing::RandomFloat;
using testing::TensorsClose;

using testing::ActiveFakeDevice;
using testing::FakeDeviceScope;
using testing::LoadOnDevice;
using testing::MakeMixed;
using testing::OnTestDevice;
using testing::RegisterDevAffine;
using testing::RegisterDevCopy;
using testing::RegisterDevFail;
using testing::RegisterDeviceOp;

// test.device DevCheck(X) = X, float32, on the device, which reports the first negative element
// of X into the run's device check report (kernels/kernel.h) as the CUDA Gather reports an index
// out of range: the work writes it (on the stand-in, recorded into a graph like any other work),
// and the session turns it into DeviceCheckError's error once the run's work is done.
class DevCheck : public OpKernel {
 public:
  DeviceType device() const override { return DeviceType::kCuda; }
  bool ChecksOnDevice() const override { return true; }
  Status DeviceCheckError(const int64_t* r) const override {
    return OutOfRange("element " + std::to_string(r[1]) + " is negative (" + std::to_string(r[2]) + "/1000)");
  }
  Status Compute(KernelContext& ctx) const override {
    if (!ctx.device_check) return Internal("DevCheck got no device check report");
    if (!ActiveFakeDevice()->Owns(ctx.device_check)) return Internal("DevCheck's report is not on the device");
    const float* x = ctx.inputs[0]->data<float>();
    float* y = ctx.outputs[0]->data<float>();
    const int64_t n = ctx.inputs[0]->numel();
    int64_t* report = ctx.device_check;
    const int64_t tag = ctx.check_tag;
    testing::FakeDeviceWork([x, y, n, report, tag] {
      for (int64_t i = 0; i < n; ++i) {
        y[i] = x[i];
        if (x[i] < 0 && report[0] == 0) {
          report[0] = tag;
          report[1] = i;
          report[2] = static_cast<int64_t>(x[i] * 1000);
        }
      }
    });
    return Status::Ok();
  }
};

void RegisterDevCheck() {
  static std::once_flag once;
  std::call_once(once, [] {
    RegisterDeviceOp("DevCheck", 1, 1, [](const KernelInit&) -> KernelOr { return std::unique_ptr<OpKernel>(new DevCheck); });
  });
}

class DeviceSession : public ::testing::Test {
 protected:
  void SetUp() override {
    RegisterAllOps();
    RegisterAllKernels();
    RegisterDevAffine();
    scope_.emplace();  // after RegisterAllKernels, which registers the real CUDA runtime where built
  }
  void TearDown() override { scope_.reset(); }
  std::optional<FakeDeviceScope> scope_;
  testing::FakeDevice& state() { return scope_->device(); }
};

TEST_F(DeviceSession, PlacesNodesCopiesAtBoundariesAndFallsBack) {
  SessionOptions cpu_opts;
  auto cpu = Session::FromGraph(MakeMixed(), cpu_opts);
  ASSERT_TRUE(cpu.ok()) << cpu.status().message();
  EXPECT_TRUE((*cpu)->fallback_nodes().empty());
  SessionOptions o;
  o.backend = Backend::kCuda;
  auto dev = Session::FromGraph(MakeMixed(), o);
  ASSERT_TRUE(dev.ok()) << dev.status().message();
  ASSERT_EQ((*dev)->fallback_nodes().size(), 2u);  // the Reshape is an alias: it stays on the device
  EXPECT_NE((*dev)->fallback_nodes()[0].find("Relu"), std::string::npos);
  EXPECT_NE((*dev)->fallback_nodes()[1].find("Add"), std::string::npos);
  EXPECT_EQ(state().copies_to_device, 1);  // the bias, once, at load
  EXPECT_EQ(state().copies_to_host, 0);

  const Tensor x = RandomFloat({2, 3}, 1);
  auto want = (*cpu)->Run({{"x", x}});
  ASSERT_TRUE(want.ok()) << want.status().message();
  for (int run = 0; run < 2; ++run) {
    state().copies_to_device = state().copies_to_host = 0;
    RunStats stats;
    auto got = (*dev)->Run({{"x", x}}, &stats);
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_EQ((*got)[0].device(), DeviceType::kCpu);
    EXPECT_TRUE(TensorsClose((*got)[0], (*want)[0], 0.f, 0.f));
    // In: x, Relu's and Add's outputs. Out: the first and the reshaped second DevAffine's outputs
    // to the CPU ops, and the result.
    EXPECT_EQ(state().copies_to_device, 3) << "run " << run;
    EXPECT_EQ(state().copies_to_host, 3) << "run " << run;
    ASSERT_EQ(stats.nodes.size(), 6u);
    for (const RunStats::NodeTime& nt : stats.nodes)
      EXPECT_EQ(nt.device, nt.op_type == "DevAffine" || nt.op_type == "Reshape" ? "cuda" : "cpu") << nt.op_type;
    if (run == 1) {
      EXPECT_EQ(stats.buffers_allocated, 0);  // device buffers and copies recycled like host ones
    }
  }
}

// Run is const and thread-safe on a device too: concurrent runs (each its own arena, copies and
// device buffers) give the single-threaded result bit for bit.
TEST_F(DeviceSession, ConcurrentRunsAreBitIdentical) {
  SessionOptions o;
  o.backend = Backend::kCuda;
  auto dev = Session::FromGraph(MakeMixed(), o);
  ASSERT_TRUE(dev.ok()) << dev.status().message();
  std::vector<Tensor> xs, want;
  for (uint32_t i = 0; i < 4; ++i) {
    xs.push_back(RandomFloat({2, 3}, 10 + i));
    auto y = (*dev)->Run({{"x", xs.back()}});
    ASSERT_TRUE(y.ok()) << y.status().message();
    want.push_back((*y)[0]);
  }
  std::vector<std::thread> threads;
  std::vector<int> bad(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int r = 0; r < 50; ++r) {
        auto y = (*dev)->Run({{"x", xs[static_cast<size_t>(t)]}});
        if (!y.ok() || !(*y)[0].BitwiseEquals(want[static_cast<size_t>(t)])) ++bad[static_cast<size_t>(t)];
      }
    });
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(bad[static_cast<size_t>(t)], 0) << "thread " << t;
}

// OutputsOn::kWhereComputed: a device output stays there (no copy back), a CPU-computed one on
// the host; a later run reuses a device output's buffer once the caller has dropped it.
TEST_F(DeviceSession, OutputsCanStayWhereTheyWereComputed) {
  Graph g = MakeMixed();
  g.outputs().push_back(g.FindValue("t"));  // the CPU Add's output
  SessionOptions o;
  o.backend = Backend::kCuda;
  auto dev = Session::FromGraph(std::move(g), o);
  ASSERT_TRUE(dev.ok()) << dev.status().message();
  const Tensor x = RandomFloat({2, 3}, 1);
  auto want = (*dev)->Run({{"x", x}});
  ASSERT_TRUE(want.ok()) << want.status().message();
  for (int run = 0; run < 2; ++run) {
    state().copies_to_host = 0;
    RunStats stats;
    auto got = (*dev)->Run({{"x", x}}, &stats, OutputsOn::kWhereComputed);
    ASSERT_TRUE(got.ok()) << got.status().message();
    ASSERT_EQ(got->size(), 2u);
    EXPECT_EQ((*got)[0].device(), DeviceType::kCuda);
    EXPECT_TRUE(state().Owns((*got)[0].buffer()->data()));
    EXPECT_EQ((*got)[1].device(), DeviceType::kCpu);
    EXPECT_EQ(state().copies_to_host, 2) << "only the two device values the CPU ops read";
    auto host = (*got)[0].ToDevice(DeviceType::kCpu);
    ASSERT_TRUE(host.ok());
    EXPECT_TRUE(host->BitwiseEquals((*want)[0]));
    EXPECT_TRUE((*got)[1].BitwiseEquals((*want)[1]));
    // One fresh buffer per run: the host output, which the caller keeps (as on the CPU). The
    // device output's buffer (and the device copy of the host output) came back from the run before.
    EXPECT_EQ(stats.buffers_allocated, 1) << "run " << run;
  }
}

// Shape inference sees a device tensor's dtype and dims only: the value comes down just where
// inference asks for it (Reshape's shape computed on the device), not for every non-float
// tensor a device node reads (an int8 model paid a download per node).
TEST_F(DeviceSession, DownloadsOnlyTheValuesShapeInferenceAsksFor) {
  RegisterDevCopy();
  Graph g = GraphBuilder(17)
                .Input("x", DType::kFloat32, {2, 3})
                .Input("u", DType::kUInt8, {4})
                .Init("shape", Tensor::FromVector<int64_t>({2}, {3, 2}))
                .Op("DevAffine", {"x"}, {"a"})
                .Op("DevCopy", {"shape"}, {"shape_d"})
                .Op("Reshape", {"a", "shape_d"}, {"r"})
                .Op("DevAffine", {"r"}, {"y"})
                .Op("DevCopy", {"u"}, {"u1"})
                .Op("DevCopy", {"u1"}, {"u2"})
                .Output("y")
                .Output("u2")
                .Build();
  auto dev = LoadOnDevice(std::move(g));
  ASSERT_TRUE(dev.ok()) << dev.status().message();
  EXPECT_TRUE((*dev)->fallback_nodes().empty());
  const Tensor x = RandomFloat({2, 3}, 1), u = Tensor::FromVector<uint8_t>({4}, {1, 2, 250, 7});
  for (int run = 0; run < 2; ++run) {
    state().copies_to_host = 0;
    auto got = (*dev)->Run({{"x", x}, {"u", u}});
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_EQ((*got)[0].dims(), (Dims{3, 2}));
    for (int64_t i = 0; i < 6; ++i) EXPECT_EQ((*got)[0].data<float>()[i], 4.f * x.data<float>()[i]);
    EXPECT_TRUE((*got)[1].BitwiseEquals(u));
    // The shape for Reshape's inference (run 0; the plan re-checks it in run 1), then the outputs.
    EXPECT_EQ(state().copies_to_host, 3) << "run " << run;
  }
}

// Shape arithmetic stays on the host: Shape reads a device tensor's dims without copying it, and
// the Gather/Unsqueeze/Concat on its output (what exporters write around every Reshape) compute
// on the host, so Reshape reads its shape there: no download, no fallback, no upload of the shape.
TEST_F(DeviceSession, ShapeArithmeticStaysOnTheHost) {
  Graph g = GraphBuilder(17)
                .Input("x", DType::kFloat32, {Dim::Symbol("batch"), 3, 4})  // a folded Shape would prove nothing
                .Init("zero", Tensor::Scalar<int64_t>(0))
                .Init("axes", Tensor::FromVector<int64_t>({1}, {0}))
                .Init("rest", Tensor::FromVector<int64_t>({1}, {-1}))
                .Op("DevAffine", {"x"}, {"a"})
                .Op("Shape", {"a"}, {"s"})
                .Op("Gather", {"s", "zero"}, {"n"}, Attrs({{"axis", Attribute::Int(0)}}))
                .Op("Unsqueeze", {"n", "axes"}, {"n1"})
                .Op("Concat", {"n1", "rest"}, {"shp"}, Attrs({{"axis", Attribute::Int(0)}}))
                .Op("Reshape", {"a", "shp"}, {"r"})
                .Op("DevAffine", {"r"}, {"y"})
                .Output("y")
                .Build();
  auto dev = LoadOnDevice(std::move(g));
  ASSERT_TRUE(dev.ok()) << dev.status().message();
  EXPECT_TRUE((*dev)->fallback_nodes().empty());
  ASSERT_EQ((*dev)->host_shape_nodes().size(), 4u);  // Shape, Gather, Unsqueeze, Concat
  const Tensor x = RandomFloat({2, 3, 4}, 1);
  for (int run = 0; run < 2; ++run) {
    state().copies_to_host = state().copies_to_device = 0;
    RunStats stats;
    auto got = (*dev)->Run({{"x", x}}, &stats);
    ASSERT_TRUE(got.ok()) << got.status().message();
    ASSERT_EQ((*got)[0].dims(), (Dims{2, 12}));
    for (int64_t i = 0; i < x.numel(); ++i) EXPECT_EQ((*got)[0].data<float>()[i], 4.f * x.data<float>()[i]);
    EXPECT_EQ(state().copies_to_device, 1) << "x only; run " << run;
    EXPECT_EQ(state().copies_to_host, 1) << "y only; run " << run;
    for (const RunStats::NodeTime& nt : stats.nodes)
      EXPECT_EQ(nt.device, nt.op_type == "DevAffine" || nt.op_type == "Reshape" ? "cuda" : "cpu") << nt.op_type;
  }
}

// A host shape value a device kernel reads (the exported transformer's Attention scale) is
// uploaded once per arena while it is unchanged, not once per run (an upload mid-run waits for
// the device's queue); a new value is uploaded again.
TEST_F(DeviceSession, UnchangedHostShapeValuesAreUploadedOnce) {
  RegisterDevCopy();
  Graph g = GraphBuilder(17)
                .Input("x", DType::kFloat32, {Dim::Symbol("batch"), 3})
                .Op("DevAffine", {"x"}, {"a"})
                .Op("Shape", {"a"}, {"s"})
                .Op("DevCopy", {"s"}, {"s_dev"})
                .Output("a")
                .Output("s_dev")
                .Build();
  auto dev = LoadOnDevice(std::move(g));
  ASSERT_TRUE(dev.ok()) << dev.status().message();
  const int64_t batches[] = {2, 2, 2, 5, 5, 2};
  const int uploads[] = {2, 1, 1, 2, 1, 2};  // x every run; the shape when it is new to the arena
  for (int run = 0; run < 6; ++run) {
    state().copies_to_device = 0;
    auto got = (*dev)->Run({{"x", RandomFloat({batches[run], 3}, 1)}});
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_EQ((*got)[1].data<int64_t>()[0], batches[run]) << "run " << run;
    EXPECT_EQ((*got)[1].data<int64_t>()[1], 3) << "run " << run;
    EXPECT_EQ(state().copies_to_device, uploads[run]) << "run " << run;
  }
}

// Not shape arithmetic: an op reading a device value, or a constant too large to be a shape,
// keeps its placement (here the CPU fallback, as the stand-in device has no such kernel).
TEST_F(DeviceSession, OnlyShapeDerivedValuesStayOnTheHost) {
  Graph g = GraphBuilder(17)
                .Input("x", DType::kFloat32, {2, Dim::Symbol("n")})
                .Init("table", RandomFloat({100, 3}, 4))
                .Init("one", Tensor::Scalar<int64_t>(1))
                .Op("DevAffine", {"x"}, {"a"})
                .Op("Shape", {"a"}, {"s"})
                .Op("Gather", {"s", "one"}, {"k"}, Attrs({{"axis", Attribute::Int(0)}}))
                .Op("Gather", {"table", "k"}, {"row"}, Attrs({{"axis", Attribute::Int(0)}}))  // a 300-element constant
                .Op("Relu", {"a"}, {"r"})                                      // a device value
                .Output("row")
                .Output("r")
                .Build();
  auto dev = LoadOnDevice(std::move(g));
  ASSERT_TRUE(dev.ok()) << dev.status().message();
  EXPECT_EQ((*dev)->host_shape_nodes().size(), 2u);  // Shape, the first Gather
  EXPECT_EQ((*dev)->fallback_nodes().size(), 2u);    // the table Gather and the Relu
  auto got = (*dev)->Run({{"x", RandomFloat({2, 3}, 1)}});
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ((*got)[0].dims(), (Dims{3}));
}

// The exported transformer (torch.onnx.export, opset 17): its Shape/Gather/Concat/Cast/Div/Pow
// chains (9 CPU fallbacks with copies on the H100 before) are host shape steps where they depend
// on the batch, and folded at load where they only pick static dims (the head dim's chain).
TEST_F(DeviceSession, ExportedTransformerShapeChainsAreHostSteps) {
  SessionOptions o;
  o.backend = Backend::kCuda;
  auto dev = Session::Load(std::string(WHITTLE_SOURCE_DIR) + "/models/transformer.onnx", o);
  ASSERT_TRUE(dev.ok()) << dev.status().message();
  std::set<std::string> host((*dev)->host_shape_nodes().begin(), (*dev)->host_shape_nodes().end());
  for (const char* n : {"/Shape (Shape)", "/Gather (Gather)", "/Concat (Concat)", "/Concat_1 (Concat)"})
    EXPECT_TRUE(host.count(n)) << n << " is not a host shape step";
  std::set<std::string> running;
  for (const Node& n : SessionGraph(**dev).nodes()) running.insert(n.name);
  for (const char* n : {"/Gather_2", "/Div", "/Cast", "/Cast_1", "/Cast_2", "/Pow"})
    EXPECT_FALSE(running.count(n)) << n << " was not folded at load";
  for (const std::string& f : (*dev)->fallback_nodes()) EXPECT_FALSE(host.count(f)) << f;
  // Still the model's results: the CPU session's logits on a few images.
  auto cpu = Session::Load(std::string(WHITTLE_SOURCE_DIR) + "/models/transformer.onnx");
  ASSERT_TRUE(cpu.ok()) << cpu.status().message();
  const Tensor x = RandomFloat({3, 1, 28, 28}, 7);
  const std::string in = (*cpu)->inputs()[0].name;
  auto want = (*cpu)->Run({{in, x}});
  auto got = (*dev)->Run({{in, x}});
  ASSERT_TRUE(want.ok() && got.ok()) << (got.ok() ? want.status().message() : got.status().message());
  EXPECT_TRUE(TensorsClose((*got)[0], (*want)[0], 1e-5f, 1e-5f));
}

// --- CUDA graphs (SessionOptions::cuda_graphs), on the stand-in's recorded work ---------------

StatusOr<std::unique_ptr<Session>> LoadWithGraphs(Graph g, bool graphs = true) {
  SessionOptions o;
  o.backend = Backend::kCuda;
  o.cuda_graphs = graphs;
  return Session::FromGraph(OnTestDevice(std::move(g)), o);
}

// x [2,3] -> DevAffine -> DevAffine(+ bias) -> DevCopy -> y; Shape(y) -> DevCopy -> dims (a host
// shape value read by a device kernel: uploaded, inside the capture, with the bytes it had).
Graph MakeGraphable() {
  return GraphBuilder(17)
      .Input("x", DType::kFloat32, {Dim::Symbol("batch"), 3})
      .Init("bias", RandomFloat({1, 3}, 2))
      .Op("DevAffine", {"x"}, {"a"})
      .Op("DevCopy", {"a"}, {"b"})
      .Op("DevAffine", {"b"}, {"y"})
      .Op("Shape", {"y"}, {"s"})
      .Op("DevCopy", {"s"}, {"dims"})
      .Output("y")
      .Output("dims")
      .Build();
}

void ExpectRunsGiveTheirOwnResults(const Session& s, int64_t batch, int runs, uint32_t seed) {
  for (int r = 0; r < runs; ++r) {
    const Tensor x = RandomFloat({batch, 3}, seed + static_cast<uint32_t>(r));
    auto got = s.Run({{"x", x}});
    ASSERT_TRUE(got.ok()) << got.status().message();
    ASSERT_EQ((*got)[0].dims(), (Dims{batch, 3}));
    ASSERT_EQ((*got)[0].device(), DeviceType::kCpu);
    for (int64_t i = 0; i < x.numel(); ++i) ASSERT_EQ((*got)[0].data<float>()[i], 4.f * x.data<float>()[i]) << "run " << r;
    ASSERT_EQ((*got)[1].data<int64_t>()[0], batch);
    ASSERT_EQ((*got)[1].data<int64_t>()[1], 3);
  }
}

std::string Report(const Session& s) {
  std::string all;
  for (const std::string& l : s.device_graph_report()) all += l + "\n";
  return all;
}

// Three eager runs, then a capture (which runs the graph once for that run's outputs), then
// replays: each run's own inputs go in and its own outputs come out, equal to the eager results.
TEST_F(DeviceSession, GraphIsCapturedOnceAndReplayedWithEachRunsInputs) {
  RegisterDevCopy();
  state().launch_us = 300;  // each eager launch costs what a replay saves
  auto dev = LoadWithGraphs(MakeGraphable());
  ASSERT_TRUE(dev.ok()) << dev.status().message();
  ExpectRunsGiveTheirOwnResults(**dev, 2, 3, 100);
  EXPECT_EQ(state().captures, 0);
  EXPECT_NE(Report(**dev).find("float32[2,3]: eager (3 of 3 runs before a capture)"), std::string::npos) << Report(**dev);
  ExpectRunsGiveTheirOwnResults(**dev, 2, 8, 200);
  EXPECT_EQ(state().captures, 1);
  EXPECT_EQ(state().replays, 8);  // the capture run's own, and 7 more
  EXPECT_NE(Report(**dev).find("float32[2,3]: replayed as a CUDA graph (7 replays"), std::string::npos) << Report(**dev);
  // A replay copies x in (queued: the launch does not wait for it) and the two outputs out,
  // nothing else.
  state().copies_to_device = state().copies_to_host = state().queued_copies = 0;
  ExpectRunsGiveTheirOwnResults(**dev, 2, 1, 300);
  EXPECT_EQ(state().copies_to_device, 1);
  EXPECT_EQ(state().queued_copies, 1);
  EXPECT_EQ(state().copies_to_host, 2);
  // Another batch size is another signature, with a graph of its own; the first keeps its.
  ExpectRunsGiveTheirOwnResults(**dev, 5, 6, 400);
  EXPECT_EQ(state().captures, 2);
  ExpectRunsGiveTheirOwnResults(**dev, 2, 2, 500);
  EXPECT_NE(Report(**dev).find("float32[5,3]: replayed as a CUDA graph (2 replays"), std::string::npos) << Report(**dev);
  EXPECT_NE(Report(**dev).find("float32[2,3]: replayed as a CUDA graph (10 replays"), std::string::npos) << Report(**dev);
}

// Threads sharing a session with graphs: one replays (the graph's buffers are its own) while the
// others, finding it busy, run eagerly; every run gets its own inputs' results.
TEST_F(DeviceSession, ConcurrentRunsWithGraphsGetTheirOwnResults) {
  RegisterDevCopy();
  auto dev = LoadWithGraphs(MakeGraphable());
  ASSERT_TRUE(dev.ok()) << dev.status().message();
  std::vector<std::thread> threads;
  std::vector<int> bad(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int r = 0; r < 40; ++r) {
        const Tensor x = RandomFloat({2, 3}, static_cast<uint32_t>(1000 * t + r));
        auto y = (*dev)->Run({{"x", x}});
        bool ok = y.ok() && (*y)[0].numel() == 6;
        for (int64_t i = 0; ok && i < 6; ++i) ok = (*y)[0].data<float>()[i] == 4.f * x.data<float>()[i];
        if (!ok) ++bad[static_cast<size_t>(t)];
      }
    });
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(bad[static_cast<size_t>(t)], 0) << "thread " << t;
  EXPECT_EQ(state().captures, 1);
  EXPECT_GT(state().replays, 0);
}

// Graphs are opt-in, and runs that time each node or keep outputs on the device stay eager.
TEST_F(DeviceSession, GraphsOnlyWhenAskedAndNotForProfiledOrDeviceOutputRuns) {
  RegisterDevCopy();
  auto off = LoadWithGraphs(MakeGraphable(), /*graphs=*/false);
  ASSERT_TRUE(off.ok()) << off.status().message();
  ExpectRunsGiveTheirOwnResults(**off, 2, 6, 1);
  EXPECT_EQ(state().captures, 0);
  EXPECT_TRUE((*off)->device_graph_report().empty());
  auto on = LoadWithGraphs(MakeGraphable());
  ASSERT_TRUE(on.ok()) << on.status().message();
  const Tensor x = RandomFloat({2, 3}, 1);
  for (int r = 0; r < 6; ++r) {
    RunStats stats;
    ASSERT_TRUE((*on)->Run({{"x", x}}, &stats).ok());
    ASSERT_TRUE((*on)->Run({{"x", x}}, nullptr, OutputsOn::kWhereComputed).ok());
  }
  EXPECT_EQ(state().captures, 0);
  EXPECT_TRUE((*on)->device_graph_report().empty());
}

// A signature whose run leaves the device, or whose shapes follow an input's values, is never
// captured, and the report says why.
TEST_F(DeviceSession, RunsThatLeaveTheDeviceOrReadValuesStayEager) {
  RegisterDevCopy();
  auto mixed = LoadWithGraphs(MakeMixed());
  ASSERT_TRUE(mixed.ok()) << mixed.status().message();
  for (int r = 0; r < 6; ++r) ASSERT_TRUE((*mixed)->Run({{"x", RandomFloat({2, 3}, 1)}}).ok());
  EXPECT_NE(Report(**mixed).find("(Relu)"), std::string::npos) << Report(**mixed);
  EXPECT_NE(Report(**mixed).find("runs on the CPU"), std::string::npos) << Report(**mixed);

  Graph g = GraphBuilder(17)
                .Input("x", DType::kFloat32, {2, 3})
                .Input("shape", DType::kInt64, {2})
                .Op("DevAffine", {"x"}, {"a"})
                .Op("Reshape", {"a", "shape"}, {"r"})
                .Op("DevCopy", {"r"}, {"y"})
                .Output("y")
                .Build();
  auto reshaped = LoadWithGraphs(std::move(g));
  ASSERT_TRUE(reshaped.ok()) << reshaped.status().message();
  for (int r = 0; r < 6; ++r) {
    // The same dims every run, another value every other run: a graph would keep the first.
    const Tensor shape = Tensor::FromVector<int64_t>({2}, r % 2 ? std::vector<int64_t>{3, 2} : std::vector<int64_t>{6, 1});
    auto got = (*reshaped)->Run({{"x", RandomFloat({2, 3}, 1)}, {"shape", shape}});
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_EQ((*got)[0].dims(), (r % 2 ? Dims{3, 2} : Dims{6, 1}));
  }
  EXPECT_EQ(state().captures, 0);
  EXPECT_NE(Report(**reshaped).find("output shapes that depend on input values"), std::string::npos) << Report(**reshaped);
}

// A capture that fails (here the stand-in refuses it; on a GPU a kernel that keeps per-thread
// state, an upload too large to record, or another thread's synchronisation) costs nothing but
// the attempt: that run is eager after all, with its own results; after a second failed attempt
// (three eager runs later) so is the signature, for good.
TEST_F(DeviceSession, FailedCaptureRunsEagerlyFromThen) {
  RegisterDevCopy();
  state().refuse_captures = "the stand-in refuses";
  auto dev = LoadWithGraphs(MakeGraphable());
  ASSERT_TRUE(dev.ok()) << dev.status().message();
  ExpectRunsGiveTheirOwnResults(**dev, 2, 4, 1);  // three eager runs, a failed capture
  EXPECT_NE(Report(**dev).find("eager (1 of 3 runs before a capture)"), std::string::npos) << Report(**dev);
  ExpectRunsGiveTheirOwnResults(**dev, 2, 8, 10);  // another failed capture at the third run
  EXPECT_EQ(state().captures, 0);
  EXPECT_EQ(state().replays, 0);
  EXPECT_NE(Report(**dev).find("eager: the capture failed (the stand-in refuses)"), std::string::npos) << Report(**dev);
}

// A graph whose replays are no faster than the eager runs is dropped (with its buffers), and the
// signature runs eagerly from then on.
TEST_F(DeviceSession, GraphThatDoesNotPayIsDropped) {
  RegisterDevCopy();
  state().replay_us = 20000;  // a replay far slower than the eager runs (no launch cost)
  auto dev = LoadWithGraphs(MakeGraphable());
  ASSERT_TRUE(dev.ok()) << dev.status().message();
  ExpectRunsGiveTheirOwnResults(**dev, 2, 12, 1);
  EXPECT_EQ(state().captures, 1);
  EXPECT_EQ(state().replays, 6);  // the capture run's, then five judged
  EXPECT_NE(Report(**dev).find("eager: a graph did not pay"), std::string::npos) << Report(**dev);
}

// x [batch, 3] -> DevAffine -> DevCheck -> DevAffine -> y = 4 x, with x < 0 reported by DevCheck.
Graph MakeChecked() {
  return GraphBuilder(17)
      .Input("x", DType::kFloat32, {Dim::Symbol("batch"), 3})
      .Op("DevAffine", {"x"}, {"a"})
      .Op("DevCheck", {"a"}, {"c"})
      .Op("DevAffine", {"c"}, {"y"})
      .Output("y")
      .Build();
}

// x with every element in [0.25, 1], or with element `bad` -0.5.
Tensor CheckedInput(int64_t batch, uint32_t seed, int64_t bad = -1) {
  Tensor x = RandomFloat({batch, 3}, seed, 0.25f, 1.f);
  if (bad >= 0) x.data<float>()[bad] = -0.5f;
  return x;
}

// A kernel's device check report: an eager run that trips it fails with the kernel's error,
// naming its node, and the next run starts from a clean report; a run that does not trip it reads
// the report (one small copy down) and gives its results. A run never waits for the device to
// check a value mid-run, so it stays graphable.
TEST_F(DeviceSession, DeviceCheckReportsBecomeTheRunsError) {
  RegisterDevCheck();
  auto dev = LoadOnDevice(MakeChecked());
  ASSERT_TRUE(dev.ok()) << dev.status().message();
  for (int r = 0; r < 4; ++r) {
    const bool trip = r % 2 == 1;
    state().copies_to_host = state().queued_downloads = 0;
    auto got = (*dev)->Run({{"x", CheckedInput(2, 10 + static_cast<uint32_t>(r), trip ? 4 : -1)}});
    // The report comes down queued behind the run's work, with the wait that ends the run.
    EXPECT_EQ(state().queued_downloads, 1) << "run " << r;
    if (trip) {
      ASSERT_FALSE(got.ok()) << "run " << r;
      EXPECT_EQ(got.status().code(), StatusCode::kOutOfRange);
      // -0.5 doubled by the first DevAffine.
      EXPECT_NE(got.status().message().find("element 4 is negative (-1000/1000)"), std::string::npos) << got.status().message();
      EXPECT_NE(got.status().message().find("DevCheck"), std::string::npos) << "the node: " << got.status().message();
    } else {
      ASSERT_TRUE(got.ok()) << "run " << r << ": " << got.status().message();
      EXPECT_EQ(state().copies_to_host, 1) << "y; the report needs no copy of its own";
    }
  }
  // Sessions without such a kernel read no report.
  auto plain = LoadOnDevice(MakeMixed());
  ASSERT_TRUE(plain.ok());
  state().copies_to_host = state().queued_downloads = 0;
  ASSERT_TRUE((*plain)->Run({{"x", RandomFloat({2, 3}, 1)}}).ok());
  EXPECT_EQ(state().copies_to_host, 3) << "the inputs of Relu and Add (on the CPU) and y, no report";
  EXPECT_EQ(state().queued_downloads, 0);
}

// In a CUDA graph the kernel's report is the graph's own (its arena's): a replay that trips it
// fails with the kernel's error, and the graph goes on replaying the next runs, reset, with their
// own results.
TEST_F(DeviceSession, DeviceCheckReportsReachTheRunThroughAGraph) {
  RegisterDevCheck();
  state().launch_us = 300;  // each eager launch costs what a replay saves
  auto dev = LoadWithGraphs(MakeChecked());
  ASSERT_TRUE(dev.ok()) << dev.status().message();
  for (int r = 0; r < 12; ++r) {
    const bool trip = r == 4 || r == 7 || r == 8;  // the capture run (the fourth) is r == 3
    const Tensor x = CheckedInput(2, 100 + static_cast<uint32_t>(r), trip ? 1 : -1);
    auto got = (*dev)->Run({{"x", x}});
    if (trip) {
      ASSERT_FALSE(got.ok()) << "run " << r;
      EXPECT_NE(got.status().message().find("element 1 is negative (-1000/1000)"), std::string::npos) << got.status().message();
      continue;
    }
    ASSERT_TRUE(got.ok()) << "run " << r << ": " << got.status().message();
    for (int64_t i = 0; i < 6; ++i) ASSERT_EQ((*got)[0].data<float>()[i], 4.f * x.data<float>()[i]) << "run " << r;
  }
  EXPECT_EQ(state().captures, 1);
  EXPECT_EQ(state().replays, 9);  // from the capture run on, the tripped ones included
  EXPECT_NE(Report(**dev).find("replayed as a CUDA graph"), std::string::npos) << Report(**dev);
  // A replay's report comes down queued behind the graph, with the output's copy.
  state().copies_to_host = state().queued_downloads = 0;
  ASSERT_TRUE((*dev)->Run({{"x", CheckedInput(2, 200, -1)}}).ok());
  EXPECT_EQ(state().replays, 10);
  EXPECT_EQ(state().queued_downloads, 1);
  EXPECT_EQ(state().copies_to_host, 1) << "y; the report needs no copy of its own";
}

// A run's uploads are queued, not waited for: the stand-in makes each only when the thread's
// queue reaches it (the kernel after it), as a CUDA stream does, so a kernel that read its input
// before the upload landed would compute on stale bytes. Every run leaves nothing queued behind,
// the runs that fail too (their arena's buffers go to the next run, maybe on another thread).
TEST_F(DeviceSession, UploadsAreQueuedAndLandBeforeAnotherRunMayReuseThem) {
  auto dev = LoadOnDevice(MakeMixed());
  ASSERT_TRUE(dev.ok()) << dev.status().message();
  auto cpu = Session::FromGraph(MakeMixed());
  ASSERT_TRUE(cpu.ok()) << cpu.status().message();
  for (uint32_t r = 0; r < 3; ++r) {
    const Tensor x = RandomFloat({2, 3}, 50 + r);
    state().copies_to_device = state().queued_copies = 0;
    auto got = (*dev)->Run({{"x", x}});
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_EQ(state().queued_copies, 3) << "x and the outputs of Relu and Add (on the CPU)";
    EXPECT_EQ(state().copies_to_device, 3);
    EXPECT_EQ(testing::FakeDevicePendingCopies(), 0);
    auto want = (*cpu)->Run({{"x", x}});
    ASSERT_TRUE(want.ok());
    EXPECT_TRUE((*got)[0].BitwiseEquals((*want)[0])) << "run " << r;
  }
  RegisterDevFail();
  Graph g = GraphBuilder(17)
                .Input("x", DType::kFloat32, {2, 3})
                .Op("Relu", {"x"}, {"r"})
                .Op("DevFail", {"r"}, {"y"})
                .Output("y")
                .Build();
  auto failing = LoadOnDevice(std::move(g));
  ASSERT_TRUE(failing.ok()) << failing.status().message();
  state().queued_copies = 0;
  auto r = (*failing)->Run({{"x", RandomFloat({2, 3}, 9)}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("DevFail refuses"), std::string::npos) << r.status().message();
  EXPECT_EQ(state().queued_copies, 1) << "Relu's output, queued for DevFail";
  EXPECT_EQ(testing::FakeDevicePendingCopies(), 0) << "a failed run waits for what it queued too";
}

TEST_F(DeviceSession, UnavailableDeviceIsAClearError) {
  RegisterDeviceRuntime(DeviceType::kCuda, nullptr);
  SessionOptions o;
  o.backend = Backend::kCuda;
  auto s = Session::FromGraph(MakeMixed(), o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("device 'cuda' is not available"), std::string::npos) << s.status().message();
}

}  // namespace
}  // namespace whittle
