// The exported-graph corpus (tests/corpus: PyTorch's two exporters, opsets 11-18, a Paddle-style
// file) through a device session on the host-memory stand-in device, whose kernels are the CPU's
// kernels claiming the device for the ops the CUDA backend has (float data; any data for the
// movement ops). So on any machine the session's device logic meets real exported graphs: the
// placement per node, the copies at every device boundary, the shape arithmetic kept on the
// host, the downloads shape inference asks for, and the plan on a second run, against the CPU
// session's outputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "kernels/backend_module.h"
#include "kernels/common/elementwise_ops.h"
#include "kernels/kernel.h"
#include "lib/ir/device.h"
#include "lib/ir/domain.h"
#include "lib/ops/op_def.h"
#include "runtime/node_runner.h"
#include "tests/util/fake_device.h"
#include "tests/util/graph_builder.h"
#include "tests/util/infer_test_util.h"
#include "tests/util/test_util.h"
#include "whittle/session.h"

namespace whittle {
namespace {

using testing::ActiveFakeDevice;
using testing::FakeDeviceScope;
using testing::RandomFloat;
using testing::TensorsClose;

std::atomic<bool> g_claim{false};
std::atomic<int> g_replay_failures{0};  // stand-in kernel runs that failed (eager ones report theirs too)

// The stand-in kernels claim nodes only while one of these lives (other tests' stand-in device
// sessions keep the plain fallbacks they count on), failed assertions included.
struct ClaimScope {
  ClaimScope() { g_claim = true; }
  ~ClaimScope() { g_claim = false; }
};

// A CPU kernel that claims the stand-in device (whose memory is host memory) and refuses any
// tensor that is not on it, but for the inputs it reads on the host (host_inputs, as the CUDA
// Slice declares its starts, ends, axes and steps), which must be host tensors.
class StandInKernel : public OpKernel {
 public:
  StandInKernel(std::unique_ptr<OpKernel> inner, uint64_t host_inputs)
      : inner_(std::move(inner)), host_inputs_(host_inputs) {}
  DeviceType device() const override { return DeviceType::kCuda; }
  uint64_t HostInputs() const override { return host_inputs_; }
  Status Compute(KernelContext& ctx) const override {
    for (size_t k = 0; k < ctx.inputs.size(); ++k) {
      const Tensor* t = ctx.inputs[k];
      if (!t) continue;
      if (host_inputs_ >> k & 1) {
        if (t->device() != DeviceType::kCpu) return Internal("a stand-in device kernel's host input is on the device");
      } else if (t->device() != DeviceType::kCuda || !ActiveFakeDevice()->Owns(t->buffer()->data())) {
        return Internal("a stand-in device kernel got a tensor that is not on the device");
      }
    }
    for (const Tensor* t : ctx.outputs)
      if (t && (t->device() != DeviceType::kCuda || !ActiveFakeDevice()->Owns(t->buffer()->data())))
        return Internal("a stand-in device kernel's output is not on the device");
    // Its work as a device kernel's: run now, or recorded while the session captures a graph (the
    // tensors held, so a replay computes on the same buffers; a replay's error is counted).
    struct Call {
      std::vector<Tensor> in, out;
      std::vector<bool> in_present, out_present;
    };
    auto call = std::make_shared<Call>();
    for (const Tensor* t : ctx.inputs) {
      call->in.push_back(t ? *t : Tensor());
      call->in_present.push_back(t != nullptr);
    }
    for (Tensor* t : ctx.outputs) {
      call->out.push_back(t ? *t : Tensor());
      call->out_present.push_back(t != nullptr);
    }
    auto result = std::make_shared<Status>(Status::Ok());
    const OpKernel* inner = inner_.get();
    const int threads = ctx.num_threads;
    testing::FakeDeviceWork([call, result, inner, threads] {
      KernelContext c;
      for (size_t k = 0; k < call->in.size(); ++k) c.inputs.push_back(call->in_present[k] ? &call->in[k] : nullptr);
      for (size_t k = 0; k < call->out.size(); ++k) c.outputs.push_back(call->out_present[k] ? &call->out[k] : nullptr);
      c.num_threads = threads;
      *result = inner->Compute(c);
      if (!result->ok()) ++g_replay_failures;
    });
    return *result;  // a recorded call's is Ok: its run is the replay's
  }

 private:
  std::unique_ptr<OpKernel> inner_;
  uint64_t host_inputs_;
};

// The inputs the CUDA factory of op reads on the host (OpKernel::HostInputs), per opset as there.
uint64_t StandInHostInputs(const std::string& op, const KernelInit& init) {
  const bool v11 = init.opset >= 11;
  if (op == "Slice") return init.opset >= 10 ? 0b11110 : 0;  // starts, ends, axes, steps
  if (op == "Resize") return v11 ? 0b1110 : 0b10;             // roi, scales, sizes (scales below 11)
  if (op == "Clip" || op == "Pad") return v11 ? 0b110 : 0;    // the bounds; pads and the constant
  if (op == "ConstantOfShape") return 0b1;                    // the shape
  if (op == "Split") return 0b10;                             // the split sizes
  if (op == "LSTM" || op == "GRU") return uint64_t{1} << 4;   // sequence_lens
  if (op.rfind("Reduce", 0) == 0) return init.input_dtypes.size() > 1 ? 0b10 : 0;  // an axes input
  return 0;
}

// In front of the ops the CUDA backend has: while g_claim is set, a kCuda kernel for float data
// in input 0 (any data for Gather, Concat, Cast, Where and ConstantOfShape), built by the op's
// CPU factory.
void RegisterStandInKernels() {
  static std::once_flag once;
  std::call_once(once, [] {
    // The CUDA module (where built) declares its kernels when it is loaded, which the fake device's
    // registration would do after these replacements: load it first, so they replace its ones.
    CudaBackendLoaded();
    const std::set<std::string> any_data = {"Gather", "Concat", "Cast", "Where", "ConstantOfShape"};
    auto wrap = [&any_data](const std::string& domain, const std::string& op) {
      const bool any = any_data.count(op) > 0;
      // In place of the op's kCuda declaration (the real one, where built, when not claiming).
      auto prev = std::make_shared<KernelFactory>();
      KernelDef def;
      def.domain = domain;
      def.op_type = op;
      def.backend = Backend::kCuda;
      def.factory = [any, op, domain, prev](const KernelInit& init) -> StatusOr<std::unique_ptr<OpKernel>> {
        const bool float_data = !init.input_dtypes.empty() && init.input_dtypes[0] == DType::kFloat32;
        if (!g_claim || init.backend != Backend::kCuda || !ActiveFakeDevice() || (!any && !float_data))
          return *prev ? (*prev)(init) : StatusOr<std::unique_ptr<OpKernel>>(nullptr);
        KernelInit cpu = init;
        cpu.backend = Backend::kCpu;
        auto k = (*KernelRegistry::Global().Find(domain, op))(cpu);
        if (!k.ok() || !*k || (*k)->OutputAliasesInput() >= 0) return k;
        return std::unique_ptr<OpKernel>(new StandInKernel(std::move(*k), StandInHostInputs(op, init)));
      };
      *prev = KernelRegistry::Global().Replace(std::move(def));
    };
    // Every float unary op (kernels/common/elementwise_ops.h's table, as kernels/cuda/elementwise.cc
    // declares them), then the rest.
    for (const ew::UnaryOpInfo& u : ew::kUnaryOps)
      if (u.types == ew::UnaryTypes::kNumeric || u.types == ew::UnaryTypes::kFloat) wrap("", u.name);
    for (const char* op :
         {"Clip", "Add", "Sub", "Mul", "Div", "Pow", "PRelu", "Max", "Min",
          "LayerNormalization", "InstanceNormalization", "BatchNormalization", "Softmax", "LogSoftmax", "Gemm",
          "MatMul", "Conv", "ConvTranspose", "MaxPool", "AveragePool", "GlobalAveragePool", "ReduceSum",
          "ReduceMean", "ReduceMax", "ReduceMin", "Expand", "Transpose", "Gather", "Concat", "Cast", "Where",
          "Slice", "Split", "Pad", "DepthToSpace", "Resize", "ConstantOfShape", "LSTM", "GRU"})
      wrap("", op);
    wrap(kWhittleDomain, "Attention");
  });
}

// The CUDA backend's known gaps on the corpus, by file: the op types that run on the CPU there.
// Hugging Face's BERT (transformers 5) builds its attention mask from the int64 mask input with
// integer and bool arithmetic (Range, GreaterOrEqual, And, integer Mul/Add, Expand and
// GatherElements of bools), which has no CUDA kernels: those nodes copy their small inputs to the
// host and back, and the model cannot be captured as a CUDA graph.
std::set<std::string> KnownFallbackOps(const std::string& file) {
  if (file == "hf_bert_ids_mask_op17.onnx") return {"Add", "And", "Expand", "GatherElements", "GreaterOrEqual", "Mul", "Range"};
  // The Llama decoder's causal + padding mask: int64/bool arithmetic on the positions, as BERT's.
  if (file == "decoder_tiny_op17.onnx") return {"Add", "And", "Expand", "LessOrEqual", "Mul", "Range"};
  // The dynamo export at opset 23: the same mask arithmetic, and ONNX's Attention,
  // RotaryEmbedding and RMSNormalization, which have CPU kernels only so far.
  if (file == "decoder_small_op23.onnx")
    return {"Add", "And", "Attention", "Expand", "GatherND", "LessOrEqual", "Max", "RMSNormalization", "Range",
            "RotaryEmbedding"};
  return {};
}

// A device kernel's host inputs (OpKernel::HostInputs, the CUDA Slice's starts/ends/axes/steps):
// a constant one is not uploaded at load, and one computed on the device comes down once per run
// (shape inference reads it too) instead of the kernel getting a device pointer to parameters.
TEST(DeviceCorpus, HostInputsStayOnTheHost) {
  RegisterAllOps();
  RegisterAllKernels();
  RegisterStandInKernels();
  FakeDeviceScope scope;
  ClaimScope claim;
  Graph g = testing::GraphBuilder(17)
                .Input("x", DType::kFloat32, {Dim::Symbol("batch"), 6})
                .Init("starts32", Tensor::FromVector<int32_t>({1}, {1}))
                .Init("ends", Tensor::FromVector<int64_t>({1}, {5}))
                .Init("axes", Tensor::FromVector<int64_t>({1}, {1}))
                .Op("Relu", {"x"}, {"a"})
                .Op("Cast", {"starts32"}, {"starts"}, testing::Attrs({{"to", Attribute::Int(7)}}))
                .Op("Slice", {"a", "starts", "ends", "axes"}, {"y"})
                .Output("y")
                .Build();
  SessionOptions o;
  o.backend = Backend::kCuda;
  o.optimize = false;  // keep the Cast of a constant a node (folding would make starts a constant)
  auto dev = Session::FromGraph(g, o);
  ASSERT_TRUE(dev.ok()) << dev.status().message();
  EXPECT_TRUE((*dev)->fallback_nodes().empty());
  EXPECT_EQ(scope.device().copies_to_device, 1) << "Cast's input only: Slice's ends and axes stay on the host";
  auto cpu = Session::FromGraph(g);
  ASSERT_TRUE(cpu.ok()) << cpu.status().message();
  const Tensor x = RandomFloat({3, 6}, 5, -1.f, 1.f);
  auto want = (*cpu)->Run({{"x", x}});
  ASSERT_TRUE(want.ok()) << want.status().message();
  for (int run = 0; run < 2; ++run) {
    scope.device().copies_to_device = scope.device().copies_to_host = 0;
    auto got = (*dev)->Run({{"x", x}});
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_TRUE((*got)[0].BitwiseEquals((*want)[0])) << "run " << run;
    EXPECT_EQ(scope.device().copies_to_device, 1) << "x; run " << run;
    EXPECT_EQ(scope.device().copies_to_host, 2) << "starts, once, and y; run " << run;
  }
}

// RunNode (what the kernel tests run every backend through) honours HostInputs too: the stand-in
// Slice gets its data on the device and its starts/ends on the host, and computes the CPU's result.
TEST(DeviceCorpus, RunNodeHandsHostInputsOnTheHost) {
  RegisterAllOps();
  RegisterAllKernels();
  RegisterStandInKernels();
  FakeDeviceScope scope;
  ClaimScope claim;
  const std::vector<Tensor> in = {RandomFloat({4, 6}, 3), Tensor::FromVector<int64_t>({1}, {1}),
                                  Tensor::FromVector<int64_t>({1}, {5}), Tensor::FromVector<int64_t>({1}, {1})};
  auto want = RunNode(testing::MakeNode("Slice", 4, 1), 13, in, Backend::kCpu);
  auto got = RunNode(testing::MakeNode("Slice", 4, 1), 13, in, Backend::kCuda);
  ASSERT_TRUE(want.ok() && got.ok()) << (got.ok() ? want.status().message() : got.status().message());
  EXPECT_TRUE((*got)[0].BitwiseEquals((*want)[0]));
  EXPECT_EQ(scope.device().copies_to_device, 1) << "the data only";
}

std::vector<std::string> CorpusFiles() {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(std::string(WHITTLE_SOURCE_DIR) + "/tests/corpus"))
    if (e.path().extension() == ".onnx") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

// Inputs for a corpus model: symbolic dims 3 (the first) and 7; floats from `seed`, integer ids
// (token ids, indices) below 100, shifted by the seed.
// A decoder with a KV cache (past_key_values.* inputs) gets consistent dims: 5 past tokens, 7 new
// ones, a mask of ones over all 12 and positions 5..11.
StatusOr<std::map<std::string, Tensor>> CorpusFeeds(const Session& s, uint32_t seed) {
  std::map<std::string, Tensor> feeds;
  bool decoder = false;
  for (const IoInfo& in : s.inputs()) decoder |= in.name.rfind("past_key_values.", 0) == 0;
  auto free_dim = [&](const Dim& d, size_t k) -> int64_t {
    if (decoder && d.param == "past_sequence") return 5;
    if (decoder && d.param == "total_sequence") return 12;
    return k == 0 ? 3 : 7;
  };
  for (const IoInfo& in : s.inputs()) {
    Dims d;
    for (size_t k = 0; k < in.shape.size(); ++k) d.push_back(in.shape[k].known() ? in.shape[k].value : free_dim(in.shape[k], k));
    if (decoder && (in.name == "attention_mask" || in.name == "position_ids") && in.dtype == DType::kInt64) {
      Tensor t(in.dtype, d);
      for (int64_t i = 0; i < t.numel(); ++i)
        t.data<int64_t>()[i] = in.name == "attention_mask" ? 1 : 5 + i % d.back();
      feeds[in.name] = t;
      continue;
    }
    if (in.dtype == DType::kFloat32) {
      feeds[in.name] = RandomFloat(d, seed++);
      continue;
    }
    if (in.dtype != DType::kInt64 && in.dtype != DType::kInt32)
      return Unimplemented(std::string("no corpus feed for a ") + DTypeName(in.dtype) + " input");
    Tensor t(in.dtype, d);
    for (int64_t i = 0; i < t.numel(); ++i) {
      const int64_t v = (i * 37 + 11 + 7 * (seed - 1)) % 100;
      if (in.dtype == DType::kInt64) t.data<int64_t>()[i] = v;
      else t.data<int32_t>()[i] = static_cast<int32_t>(v);
    }
    feeds[in.name] = t;
  }
  return feeds;
}

// A corpus file's CPU session and its session on the CUDA backend (here the stand-in device).
struct CorpusSessions {
  std::unique_ptr<Session> cpu, dev;
};
StatusOr<CorpusSessions> LoadCorpusSessions(const std::string& path, bool cuda_graphs) {
  CorpusSessions s;
  WH_ASSIGN_OR_RETURN(s.cpu, Session::Load(path));
  SessionOptions o;
  o.backend = Backend::kCuda;
  o.cuda_graphs = cuda_graphs;
  WH_ASSIGN_OR_RETURN(s.dev, Session::Load(path, o));
  return s;
}

TEST(DeviceCorpus, ExportedGraphsRunOnTheStandInDeviceAsOnTheCpu) {
  RegisterAllOps();
  RegisterAllKernels();
  RegisterStandInKernels();
  FakeDeviceScope scope;
  ClaimScope claim;
  const std::vector<std::string> files = CorpusFiles();
  ASSERT_GE(files.size(), 10u);
  int with_shape_steps = 0;
  for (const std::string& path : files) {
    const std::string name = std::filesystem::path(path).filename().string();
    SCOPED_TRACE(name);
    auto loaded = LoadCorpusSessions(path, /*cuda_graphs=*/false);
    ASSERT_TRUE(loaded.ok()) << loaded.status().message();
    const std::unique_ptr<Session>* cpu = &loaded->cpu;
    const std::unique_ptr<Session>* dev = &loaded->dev;
    auto made = CorpusFeeds(**cpu, 1);
    ASSERT_TRUE(made.ok()) << made.status().message();
    const std::map<std::string, Tensor>& feeds = *made;
    auto want = (*cpu)->Run(feeds);
    ASSERT_TRUE(want.ok()) << want.status().message();
    for (int run = 0; run < 2; ++run) {  // the second run follows the recorded plan
      RunStats stats;
      auto got = (*dev)->Run(feeds, &stats);
      ASSERT_TRUE(got.ok()) << "run " << run << ": " << got.status().message();
      ASSERT_EQ(got->size(), want->size());
      for (size_t k = 0; k < got->size(); ++k) EXPECT_TRUE(TensorsClose((*got)[k], (*want)[k], 1e-4f, 1e-4f)) << "output " << k;
      int on_device = 0;
      for (const RunStats::NodeTime& nt : stats.nodes) on_device += nt.device == "cuda";
      EXPECT_GT(on_device, 0) << "no node ran on the device";
      if (run == 1) {
        std::string fb;
        for (const std::string& f : (*dev)->fallback_nodes()) fb += (fb.empty() ? "" : ", ") + f.substr(f.rfind('(') + 1, f.size() - f.rfind('(') - 2);
        std::printf("[ corpus   ] %-36s %3d of %3zu nodes on the device, %2zu host shape steps, %2zu fallbacks%s%s\n",
                    name.c_str(), on_device, stats.nodes.size(), (*dev)->host_shape_nodes().size(),
                    (*dev)->fallback_nodes().size(), fb.empty() ? "" : ": ", fb.c_str());
      }
    }
    // No shape step is a fallback, and none has a device value among its inputs but Shape's.
    std::set<std::string> fallbacks((*dev)->fallback_nodes().begin(), (*dev)->fallback_nodes().end());
    for (const std::string& h : (*dev)->host_shape_nodes()) EXPECT_FALSE(fallbacks.count(h)) << h;
    // Every op of the corpus has a (stand-in) device kernel or is shape arithmetic, but for the
    // known gaps: a fallback here is a placement regression, or a new exporter op the CUDA
    // backend lacks.
    std::set<std::string> fallback_ops;
    for (const std::string& f : fallbacks) fallback_ops.insert(f.substr(f.rfind('(') + 1, f.size() - f.rfind('(') - 2));
    EXPECT_EQ(fallback_ops, KnownFallbackOps(name)) << fallbacks.size() << " fallback(s)";
    with_shape_steps += !(*dev)->host_shape_nodes().empty();
  }
  EXPECT_GE(with_shape_steps, 3) << "the exporters' Shape chains should stay on the host in several models";
}

// SessionOptions::cuda_graphs on real exported graphs: each model's runs, eager, captured (the
// stand-in records the kernels' work) and replayed, with new inputs every run, give the CPU
// session's outputs for those inputs; what a signature got is in the report.
TEST(DeviceCorpus, ExportedGraphsReplayAsCapturedGraphsWithEachRunsInputs) {
  RegisterAllOps();
  RegisterAllKernels();
  RegisterStandInKernels();
  FakeDeviceScope scope;
  ClaimScope claim;
  scope.device().launch_us = 20;  // what an eager launch costs, so that a graph pays
  g_replay_failures = 0;
  int captured = 0;
  for (const std::string& path : CorpusFiles()) {
    const std::string name = std::filesystem::path(path).filename().string();
    SCOPED_TRACE(name);
    auto loaded = LoadCorpusSessions(path, /*cuda_graphs=*/true);
    ASSERT_TRUE(loaded.ok()) << loaded.status().message();
    const std::unique_ptr<Session>* cpu = &loaded->cpu;
    const std::unique_ptr<Session>* dev = &loaded->dev;
    const int before = scope.device().captures;
    for (uint32_t run = 0; run < 8; ++run) {
      auto feeds = CorpusFeeds(**cpu, 1 + 10 * run);
      ASSERT_TRUE(feeds.ok()) << feeds.status().message();
      auto want = (*cpu)->Run(*feeds);
      ASSERT_TRUE(want.ok()) << want.status().message();
      auto got = (*dev)->Run(*feeds);
      ASSERT_TRUE(got.ok()) << "run " << run << ": " << got.status().message();
      ASSERT_EQ(got->size(), want->size());
      for (size_t k = 0; k < got->size(); ++k)
        EXPECT_TRUE(TensorsClose((*got)[k], (*want)[k], 1e-4f, 1e-4f)) << "run " << run << ", output " << k;
    }
    captured += scope.device().captures > before;
    for (const std::string& line : (*dev)->device_graph_report()) {
      std::printf("[ graphs   ] %-36s %s\n", name.c_str(), line.c_str());
      EXPECT_EQ(line.find("capture failed"), std::string::npos) << line;
    }
  }
  EXPECT_EQ(g_replay_failures, 0);
  // Every model without a known fallback: each stays on the device with shapes fixed by its
  // inputs' dims (the token-id models' Gathers take their indices on the device and report a bad
  // one there).
  int capturable = 0;
  for (const std::string& path : CorpusFiles())
    capturable += KnownFallbackOps(std::filesystem::path(path).filename().string()).empty();
  EXPECT_EQ(captured, capturable);
}

}  // namespace
}  // namespace whittle
