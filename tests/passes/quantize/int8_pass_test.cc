// --int8 on a small synthetic CNN (Conv+BN+Relu+MaxPool+Flatten+Gemm+Relu+MatMul): the emitted
// QDQ structure (op counts, per-axis weight scales, int32 biases, Relu before the output
// QuantizeLinear), its numbers in Whittle's runtime (float emulation of Q/DQ) against the
// float graph within a few output quanta, idempotence, composition after --svd, the option
// and calibration errors, QOperator/dynamic structure, and save -> onnx checker -> load.
#include <gtest/gtest.h>

#include <cmath>

#include "lib/data/dataset.h"
#include "lib/onnx/model_io.h"
#include "lib/ops/op_def.h"
#include "passes/quantize/calibration.h"
#include "whittle/session.h"
#include "tests/passes/svd/svd_test_util.h"
#include "tests/util/graph_builder.h"
#include "tests/util/scratch_dir.h"
#include "tests/util/test_util.h"

namespace whittle {
namespace {

using testing::CountOps;
using testing::FindLayer;
using testing::FindNode;
using testing::RunPass;

AttributeMap Ints(const std::string& k, std::vector<int64_t> v) {
  AttributeMap a;
  a.Set(k, Attribute::Ints(std::move(v)));
  return a;
}

// x[N,1,8,8] -> conv(4,3x3,pad 1) -> bn -> relu -> maxpool 2 -> flatten -> fc (Gemm transB=1,
// 64->16, bias) -> relu -> head (MatMul 16->10) -> y.
// clip: the Relus become Clip(0, 6) after the conv (ReLU6) and Clip(0.05, 6) after fc (a lower
// bound that quantization's saturation does not give).
Graph SmallCnn(int64_t opset = 13, bool clip = false) {
  testing::GraphBuilder b(opset);
  b.Input("x", DType::kFloat32, {Dim::Symbol("N"), 1, 8, 8});
  b.Init("conv.w", testing::RandomFloat({4, 1, 3, 3}, 1, -0.5f, 0.5f));
  b.Init("conv.b", testing::RandomFloat({4}, 2, -0.1f, 0.1f));
  b.Init("bn.scale", testing::RandomFloat({4}, 3, 0.5f, 1.5f));
  b.Init("bn.bias", testing::RandomFloat({4}, 4, -0.2f, 0.2f));
  b.Init("bn.mean", testing::RandomFloat({4}, 5, -0.1f, 0.1f));
  b.Init("bn.var", testing::RandomFloat({4}, 6, 0.5f, 1.5f));
  b.Init("fc.w", testing::RandomFloat({16, 64}, 7, -0.3f, 0.3f));
  b.Init("fc.b", testing::RandomFloat({16}, 8, -0.1f, 0.1f));
  b.Init("head.w", testing::RandomFloat({16, 10}, 9, -0.5f, 0.5f));
  AttributeMap conv = Ints("kernel_shape", {3, 3});
  conv.Set("pads", Attribute::Ints({1, 1, 1, 1}));
  b.Op("Conv", {"x", "conv.w", "conv.b"}, {"c"}, conv);
  b.Op("BatchNormalization", {"c", "bn.scale", "bn.bias", "bn.mean", "bn.var"}, {"bn"});
  if (clip) {
    b.Init("zero", Tensor::Scalar<float>(0.f)).Init("six", Tensor::Scalar<float>(6.f));
    b.Init("low", Tensor::Scalar<float>(0.05f));
    b.Op("Clip", {"bn", "zero", "six"}, {"r1"});
  } else {
    b.Op("Relu", {"bn"}, {"r1"});
  }
  AttributeMap pool = Ints("kernel_shape", {2, 2});
  pool.Set("strides", Attribute::Ints({2, 2}));
  b.Op("MaxPool", {"r1"}, {"p"}, pool);
  b.Op("Flatten", {"p"}, {"f"});
  AttributeMap gemm;
  gemm.Set("transB", Attribute::Int(1));
  b.Op("Gemm", {"f", "fc.w", "fc.b"}, {"h"}, gemm);
  if (clip) b.Op("Clip", {"h", "low", "six"}, {"r2"});
  else b.Op("Relu", {"h"}, {"r2"});
  b.Op("MatMul", {"r2", "head.w"}, {"y"});
  b.Output("y");
  Graph g = b.Build();
  g.nodes()[0].name = "conv";
  g.nodes()[5].name = "fc";
  g.nodes()[7].name = "head";
  EXPECT_TRUE(InferShapes(g).ok());
  return g;
}

Dataset Calibration(int64_t n = 64) {
  auto d = MakeDataset(testing::RandomFloat({n, 1, 8, 8}, 42, 0.f, 1.f), Tensor(), "random");
  EXPECT_TRUE(d.ok()) << d.status().message();
  return std::move(d).value();
}

StatusOr<Tensor> RunFloatEmulation(const Graph& g, const Tensor& x) {
  SessionOptions so;
  so.optimize = false;
  WH_ASSIGN_OR_RETURN(auto s, Session::FromGraph(g, so));
  WH_ASSIGN_OR_RETURN(std::vector<Tensor> out, s->Run({{"x", x}}));
  return out[0];
}

// The float model's and the quantized model's outputs on x, both run by float emulation.
void EmulateBoth(const Graph& orig, const Graph& g, const Tensor& x, Tensor* yf, Tensor* yq) {
  auto f = RunFloatEmulation(orig, x);
  auto q = RunFloatEmulation(g, x);
  ASSERT_TRUE(f.ok() && q.ok()) << (f.ok() ? q.status().message() : f.status().message());
  *yf = *f;
  *yq = *q;
}

// Scale of the QuantizeLinear that produces graph output `name` (QDQ format).
float OutputScale(const Graph& g, const std::string& name) {
  const Node& dq = g.nodes()[static_cast<size_t>(g.value(g.FindValue(name)).producer)];
  EXPECT_EQ(dq.op_type, "DequantizeLinear");
  return g.value(dq.inputs[1]).initializer->data<float>()[0];
}

const Node* DqOfInput(const Graph& g, const Node& n, size_t slot) {
  const int p = g.value(n.inputs[slot]).producer;
  return p >= 0 ? &g.nodes()[static_cast<size_t>(p)] : nullptr;
}

TEST(Int8Pass, QdqStructureMatchesTheContract) {
  Graph g = SmallCnn();
  Dataset calib = Calibration();
  PassContext ctx;
  ctx.calibration = &calib;
  auto r = RunPass(g, "int8", "", ctx);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(CountOps(g, "BatchNormalization"), 0);  // folded into the conv
  EXPECT_EQ(CountOps(g, "Conv"), 1);
  EXPECT_EQ(CountOps(g, "Relu"), 2);
  // Activations x, r1, p (inherited through MaxPool), f (through Flatten), r2 and y: one Q each.
  EXPECT_EQ(CountOps(g, "QuantizeLinear"), 6);
  // Those six, plus three weights and two biases.
  EXPECT_EQ(CountOps(g, "DequantizeLinear"), 11);
  for (const char* name : {"conv", "fc", "head"}) {
    const Node* n = FindNode(g, name);
    ASSERT_NE(n, nullptr) << name;
    const Node* wdq = DqOfInput(g, *n, 1);
    ASSERT_NE(wdq, nullptr);
    ASSERT_EQ(wdq->op_type, "DequantizeLinear") << name;
    const Tensor& wq = *g.value(wdq->inputs[0]).initializer;
    const Tensor& ws = *g.value(wdq->inputs[1]).initializer;
    const Tensor& wz = *g.value(wdq->inputs[2]).initializer;
    EXPECT_EQ(wq.dtype(), DType::kInt8) << name;
    EXPECT_EQ(wz.dtype(), DType::kInt8) << name;
    // Per-axis on the output channel: conv [4,1,3,3] axis 0; Gemm transB [16,64] axis 0; MatMul [16,10] axis 1.
    const int64_t axis = wdq->attrs.GetInt("axis", 1);
    const int64_t want_axis = std::string(name) == "head" ? 1 : 0;
    EXPECT_EQ(axis, want_axis) << name;
    EXPECT_EQ(ws.numel(), wq.dim(static_cast<int>(want_axis))) << name;
    // The activation input comes through a DequantizeLinear of uint8 with a scalar scale.
    const Node* adq = DqOfInput(g, *n, 0);
    ASSERT_NE(adq, nullptr);
    EXPECT_EQ(adq->op_type, "DequantizeLinear") << name;
    EXPECT_EQ(g.value(adq->inputs[0]).dtype, DType::kUInt8) << name;
    EXPECT_EQ(g.value(adq->inputs[1]).initializer->numel(), 1) << name;
    if (std::string(name) == "head") continue;
    const Node* bdq = DqOfInput(g, *n, 2);
    ASSERT_NE(bdq, nullptr);
    ASSERT_EQ(bdq->op_type, "DequantizeLinear") << name;
    EXPECT_EQ(g.value(bdq->inputs[0]).initializer->dtype(), DType::kInt32) << name;
    const Tensor& bs = *g.value(bdq->inputs[1]).initializer;
    const float a_scale = g.value(adq->inputs[1]).initializer->data<float>()[0];
    for (int64_t i = 0; i < bs.numel(); ++i)
      EXPECT_EQ(bs.data<float>()[i], a_scale * ws.data<float>()[i]) << name << " bias scale " << i;
    // The Relu sits between the layer and its output QuantizeLinear.
    const std::vector<int> readers = g.Consumers(n->outputs[0]);
    ASSERT_EQ(readers.size(), 1u);
    const Node& relu = g.nodes()[static_cast<size_t>(readers[0])];
    EXPECT_EQ(relu.op_type, "Relu") << name;
    const std::vector<int> after = g.Consumers(relu.outputs[0]);
    ASSERT_EQ(after.size(), 1u);
    EXPECT_EQ(g.nodes()[static_cast<size_t>(after[0])].op_type, "QuantizeLinear") << name;
  }
  // The graph output keeps its name and comes back to float through a DequantizeLinear.
  EXPECT_EQ(g.value(g.outputs()[0]).name, "y");
  EXPECT_EQ(g.value(g.outputs()[0]).dtype, DType::kFloat32);
  ASSERT_EQ(r->layers.size(), 3u);
  for (const LayerReport& l : r->layers) {
    EXPECT_EQ(l.action, "int8") << l.node;
    EXPECT_NE(l.detail.find("scale"), std::string::npos) << l.detail;
    EXPECT_NE(l.detail.find("bytes"), std::string::npos) << l.detail;
  }
  bool notes_calib = false;
  for (const std::string& n : r->notes) notes_calib |= n.find("calibration mse on 64 samples") != std::string::npos;
  EXPECT_TRUE(notes_calib);
}

TEST(Int8Pass, EmulatedResultStaysWithinAFewOutputQuanta) {
  // minmax-based ranges never clip the inputs they were measured on: a few output quanta.
  // The histogram methods clip tails by design, so they get a wider bound.
  for (const char* spec : {"calibration=minmax", "calibration=minmax,activations=s8", "calibration=minmax,per-channel=0",
                           "calibration=minmax,reduce-range=0", "format=qdq,calibration=percentile:99.99",
                           "calibration=entropy", "", "activations=s8"}) {
    const bool clips = std::string(spec).find("minmax") == std::string::npos;
    Graph g = SmallCnn();
    const Graph orig = g;
    Dataset calib = Calibration();
    PassContext ctx;
    ctx.calibration = &calib;
    auto r = RunPass(g, "int8", spec, ctx);
    ASSERT_TRUE(r.ok()) << spec << ": " << r.status().message();
    const Tensor x = SliceBatch(calib.inputs, 0, 16);
    Tensor yf, yq;
    ASSERT_NO_FATAL_FAILURE(EmulateBoth(orig, g, x, &yf, &yq));
    const float q = OutputScale(g, "y");
    const float diff = testing::MaxAbsDiff(yf, yq);
    float amax = 0;
    for (int64_t i = 0; i < yf.numel(); ++i) amax = std::max(amax, std::fabs(yf.data<float>()[i]));
    std::printf("[ int8 ] '%s': max |float - int8| %.4g = %.2f output quanta (|y| <= %.3g)\n", spec, diff, diff / q, amax);
    EXPECT_LE(diff, (clips ? 8 : 4) * q) << spec;
    EXPECT_GT(diff, 0.f) << spec << ": the graph was not quantized";
  }
}

// Default reduce-range=1: each channel's largest weight maps to 63; reduce-range=0 uses 127.
TEST(Int8Pass, ReduceRangeKeepsWeightsWithinSevenBits) {
  for (const auto& [spec, qmax] : {std::pair<const char*, int>{"", 63}, {"reduce-range=1", 63}, {"reduce-range=0", 127}}) {
  SCOPED_TRACE(spec);
  Graph g = SmallCnn();
  Dataset calib = Calibration();
  PassContext ctx;
  ctx.calibration = &calib;
  ASSERT_TRUE(RunPass(g, "int8", spec, ctx).ok());
  int weights = 0;
  for (const Node& n : g.nodes()) {
    if (n.op_type != "DequantizeLinear" || !g.value(n.inputs[0]).initializer) continue;
    const Tensor& q = *g.value(n.inputs[0]).initializer;
    if (q.dtype() != DType::kInt8) continue;
    ++weights;
    int max_abs = 0;
    for (int64_t i = 0; i < q.numel(); ++i) max_abs = std::max(max_abs, std::abs(static_cast<int>(q.data<int8_t>()[i])));
    EXPECT_EQ(max_abs, qmax) << g.value(n.inputs[0]).name;
  }
  EXPECT_EQ(weights, 3);
  }
}

// A range that cuts off a visible share of a tensor's values is reported by name (the usual cause
// of an accuracy collapse); ranges that keep everything are not.
TEST(Int8Pass, ReportsTensorsWhoseRangeClipsManyValues) {
  for (const auto& [spec, expect] : {std::pair<const char*, bool>{"calibration=percentile:90", true},
                                     {"calibration=minmax", false}}) {
    Graph g = SmallCnn();
    Dataset calib = Calibration();
    PassContext ctx;
    ctx.calibration = &calib;
    auto r = RunPass(g, "int8", spec, ctx);
    ASSERT_TRUE(r.ok()) << spec << ": " << r.status().message();
    int clip_notes = 0;
    for (const std::string& n : r->notes) {
      if (n.find(" clips ") == std::string::npos) continue;
      ++clip_notes;
      EXPECT_NE(n.find("try calibration=mse"), std::string::npos) << n;
    }
    if (expect) EXPECT_GE(clip_notes, 1) << spec;
    else EXPECT_EQ(clip_notes, 0) << spec;
  }
}

TEST(Int8Math, CountBeyondCountsTheBinsPastTheThreshold) {
  const std::vector<double> h = {5, 4, 3, 2, 1};  // limit 10: bins of width 2
  EXPECT_DOUBLE_EQ(quant::CountBeyond(h, 10.0, 10.0), 0.0);
  EXPECT_DOUBLE_EQ(quant::CountBeyond(h, 10.0, 6.0), 3.0);
  EXPECT_DOUBLE_EQ(quant::CountBeyond(h, 10.0, 2.0), 10.0);
}

TEST(Int8Pass, RunningTwiceEqualsRunningOnce) {
  Graph g = SmallCnn();
  Dataset calib = Calibration();
  PassContext ctx;
  ctx.calibration = &calib;
  ASSERT_TRUE(RunPass(g, "int8", "", ctx).ok());
  const Graph once = g;
  auto r = RunPass(g, "int8", "", ctx);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(g.nodes().size(), once.nodes().size());
  for (size_t i = 0; i < g.nodes().size(); ++i) EXPECT_EQ(g.nodes()[i].op_type, once.nodes()[i].op_type) << i;
  EXPECT_EQ(g.values().size(), once.values().size());
  const Tensor x = SliceBatch(calib.inputs, 0, 8);
  auto y1 = RunFloatEmulation(once, x);
  auto y2 = RunFloatEmulation(g, x);
  ASSERT_TRUE(y1.ok() && y2.ok());
  EXPECT_EQ(testing::MaxAbsDiff(*y1, *y2), 0.f);
  for (const LayerReport& l : r->layers) {
    EXPECT_EQ(l.action, "skipped") << l.node;
    EXPECT_NE(l.reason.find("already quantized"), std::string::npos) << l.reason;
  }
}

TEST(Int8Pass, ComposesAfterSvd) {
  Graph g = SmallCnn();
  Dataset calib = Calibration();
  PassContext ctx;
  ctx.calibration = &calib;
  ASSERT_TRUE(RunPass(g, "svd", "rank=8,round=1", ctx).ok());
  const Graph orig = g;  // the factorized float graph
  const int gemms = CountOps(g, "Gemm");
  EXPECT_EQ(gemms, 2);  // fc factorized into two Gemms
  auto r = RunPass(g, "int8", "", ctx);
  ASSERT_TRUE(r.ok()) << r.status().message();
  int quantized = 0;
  for (const LayerReport& l : r->layers) quantized += l.action == "int8";
  EXPECT_GE(quantized, 4);  // conv, both factors, head
  const Tensor x = SliceBatch(calib.inputs, 0, 16);
  Tensor yf, yq;
  ASSERT_NO_FATAL_FAILURE(EmulateBoth(orig, g, x, &yf, &yq));
  EXPECT_LE(testing::MaxAbsDiff(yf, yq), 4 * OutputScale(g, "y"));
}

TEST(Int8Pass, ExcludeOpTypesAndLayerOverrides) {
  Graph g = SmallCnn();
  Dataset calib = Calibration();
  PassContext ctx;
  ctx.calibration = &calib;
  auto r = RunPass(g, "int8", "exclude=head,layer=fc:per-channel=0,op-types=Gemm,MatMul", ctx);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const LayerReport* head = FindLayer(*r, "head");
  const LayerReport* conv = FindLayer(*r, "conv");
  const LayerReport* fc = FindLayer(*r, "fc");
  ASSERT_TRUE(head && conv && fc);
  EXPECT_EQ(head->action, "skipped");
  EXPECT_NE(head->reason.find("exclude"), std::string::npos);
  EXPECT_EQ(conv->action, "skipped");
  EXPECT_NE(conv->reason.find("op-types"), std::string::npos);
  EXPECT_EQ(fc->action, "int8");
  EXPECT_NE(fc->detail.find("per-tensor"), std::string::npos) << fc->detail;
  EXPECT_EQ(CountOps(g, "BatchNormalization"), 1);  // no Conv quantized: BN left alone
}

TEST(Int8Pass, ErrorsNameTheOption) {
  Graph g = SmallCnn();
  auto r = RunPass(g, "int8", "");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--int8 mode=static needs --calibration-data"), std::string::npos)
      << r.status().message();
  for (const auto& [spec, what] : std::vector<std::pair<std::string, std::string>>{
           {"mode=fast", "mode"},
           {"calibration=kl", "calibration"},
           {"calibration=percentile:20", "percentile"},
           {"calibration=percentile:abc", "percentile"},
           {"per-channel=2", "per-channel"},
           {"activations=u4", "activations"},
           {"format=tflite", "format"},
           {"op-types=Conv,Relu", "op-types"},
           {"mode=dynamic,calibration=mse", "calibration"},
           {"mode=dynamic,format=qdq", "format"},
           {"bits=4", "bits"}}) {
    auto o = PassOptions::Parse("int8", spec);
    ASSERT_TRUE(o.ok()) << spec;
    auto p = MakePass("int8", *o);
    ASSERT_FALSE(p.ok()) << spec;
    EXPECT_NE(p.status().message().find(what), std::string::npos) << spec << ": " << p.status().message();
  }
  Dataset calib = Calibration(8);
  PassContext ctx;
  ctx.calibration = &calib;
  auto missing = RunPass(g, "int8", "exclude=nosuch", ctx);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("'nosuch'"), std::string::npos);
}

TEST(Int8Pass, RaisesALowerOpsetAndConvertsAttributesThatBecameInputs) {
  // opset 11: Unsqueeze's axes is an attribute; at 13 it is an input.
  testing::GraphBuilder b(11);
  b.Input("x", DType::kFloat32, {Dim::Symbol("N"), 8});
  b.Init("w", testing::RandomFloat({8, 4}, 3));
  b.Op("MatMul", {"x", "w"}, {"h"});
  b.Op("Unsqueeze", {"h"}, {"y"}, Ints("axes", {1}));
  b.Output("y");
  Graph g = b.Build();
  ASSERT_TRUE(InferShapes(g).ok());
  auto d = MakeDataset(testing::RandomFloat({16, 8}, 4), Tensor(), "random");
  ASSERT_TRUE(d.ok());
  PassContext ctx;
  ctx.calibration = &*d;
  auto r = RunPass(g, "int8", "", ctx);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(g.OpsetFor(""), 13);
  const Node* u = nullptr;
  for (const Node& n : g.nodes())
    if (n.op_type == "Unsqueeze") u = &n;
  ASSERT_NE(u, nullptr);
  EXPECT_EQ(u->inputs.size(), 2u);
  EXPECT_FALSE(u->attrs.Has("axes"));
  // An op whose meaning changes at 13 and is not converted: refused, graph untouched.
  testing::GraphBuilder b2(11);
  b2.Input("x", DType::kFloat32, {2, 3, 4});
  b2.Init("w", testing::RandomFloat({4, 4}, 3));
  b2.Op("MatMul", {"x", "w"}, {"h"});
  AttributeMap ax;
  ax.Set("axis", Attribute::Int(1));
  b2.Op("Softmax", {"h"}, {"y"}, ax);
  b2.Output("y");
  Graph g2 = b2.Build();
  ASSERT_TRUE(InferShapes(g2).ok());
  auto r2 = RunPass(g2, "int8", "", ctx);
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.status().message().find("Softmax"), std::string::npos) << r2.status().message();
  EXPECT_EQ(g2.OpsetFor(""), 11);
}

// Saves g, runs the ONNX checker on the file and loads it back without op validation (the
// QOperator/integer ops may not be registered in this build's runtime yet).
void SaveAndCheck(const Graph& g, const std::string& what) {
  testing::ScratchDir dir;
  const std::string path = dir / "int8.onnx";
  Status s = SaveModel(g, path);
  ASSERT_TRUE(s.ok()) << what << ": " << s.message();
  Status check = CheckModelWithOnnxChecker(path);
  EXPECT_TRUE(check.ok()) << what << ": " << check.message();
  LoadOptions lo;
  lo.validate_ops = false;
  auto loaded = LoadModel(path, lo);
  ASSERT_TRUE(loaded.ok()) << what << ": " << loaded.status().message();
  EXPECT_EQ(loaded->nodes().size(), g.nodes().size()) << what;
}

TEST(Int8Pass, QdqSavesLoadsAndPassesTheOnnxChecker) {
  Graph g = SmallCnn();
  Dataset calib = Calibration();
  PassContext ctx;
  ctx.calibration = &calib;
  ASSERT_TRUE(RunPass(g, "int8", "", ctx).ok());
  SaveAndCheck(g, "qdq");
  testing::ScratchDir dir;
  const std::string path = dir / "int8.onnx";
  ASSERT_TRUE(SaveModel(g, path).ok());
  auto loaded = LoadModel(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  const Tensor x = SliceBatch(calib.inputs, 0, 4);
  auto y1 = RunFloatEmulation(g, x);
  auto y2 = RunFloatEmulation(*loaded, x);
  ASSERT_TRUE(y1.ok() && y2.ok());
  EXPECT_EQ(testing::MaxAbsDiff(*y1, *y2), 0.f);
}

// The pass alone (no PassManager check): QOperator and dynamic ops may not be registered in
// Whittle's runtime of this build, so shape inference is not asked of them here.
StatusOr<PassReport> RunPassOnly(Graph& g, const std::string& spec, const PassContext& ctx) {
  WH_ASSIGN_OR_RETURN(PassOptions o, PassOptions::Parse("int8", spec));
  WH_ASSIGN_OR_RETURN(std::unique_ptr<Pass> pass, MakePass("int8", std::move(o)));
  WH_ASSIGN_OR_RETURN(PassReport r, pass->Run(g, ctx));
  WH_RETURN_IF_ERROR(g.Verify());
  return r;
}

TEST(Int8Pass, QOperatorStructure) {
  Graph g = SmallCnn();
  Dataset calib = Calibration();
  PassContext ctx;
  ctx.calibration = &calib;
  auto r = RunPassOnly(g, "format=qoperator", ctx);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(CountOps(g, "QLinearConv"), 1);
  EXPECT_EQ(CountOps(g, "QLinearMatMul"), 1);  // head: MatMul without bias
  EXPECT_EQ(CountOps(g, "MatMulInteger"), 1);  // fc: Gemm with bias
  EXPECT_EQ(CountOps(g, "Conv") + CountOps(g, "Gemm") + CountOps(g, "MatMul"), 0);
  EXPECT_EQ(CountOps(g, "QuantizeLinear"), 2);    // region entry (x) and after fc's float rescale
  EXPECT_EQ(CountOps(g, "DequantizeLinear"), 1);  // region exit (y)
  // Relu after the conv is the u8 saturation at zero point 0; fc's Relu runs before its Q.
  EXPECT_EQ(CountOps(g, "Relu"), 1);
  for (const Node& n : g.nodes()) {
    if (n.op_type == "MaxPool" || n.op_type == "Flatten") {
      EXPECT_EQ(g.value(n.inputs[0]).dtype, DType::kUInt8) << n.op_type;
    }
  }
  const Node* qc = nullptr;
  for (const Node& n : g.nodes())
    if (n.op_type == "QLinearConv") qc = &n;
  ASSERT_NE(qc, nullptr);
  ASSERT_EQ(qc->inputs.size(), 9u);
  EXPECT_EQ(g.value(qc->inputs[8]).initializer->dtype(), DType::kInt32);
  EXPECT_EQ(g.value(qc->inputs[4]).initializer->numel(), 4);  // per-channel
  SaveAndCheck(g, "qoperator");
}

// A Clip with constant bounds after a layer is kept before its output QuantizeLinear like a
// Relu: nothing quantizes the layer's own output. QOperator drops the ReLU6 whose bounds are the
// output's saturation and runs fc's Clip(0.05, 6) on dequantized values. Both stay within a few
// output quanta of the float model, and the runtime (which folds the QDQ Clip into its int8
// conv's clamp) agrees with the emulation.
TEST(Int8Pass, ClipAfterALayerIsKeptBeforeItsQuantize) {
  for (const char* spec : {"calibration=minmax", "calibration=minmax,format=qoperator"}) {
    SCOPED_TRACE(spec);
    const bool qop = std::string(spec).find("qoperator") != std::string::npos;
    Graph g = SmallCnn(13, /*clip=*/true);
    const Graph orig = g;
    Dataset calib = Calibration();
    PassContext ctx;
    ctx.calibration = &calib;
    auto r = RunPass(g, "int8", spec, ctx);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(CountOps(g, "Clip"), qop ? 1 : 2);
    for (const Node& n : g.nodes()) {
      if (n.op_type != "Clip") continue;
      // The Clip reads the layer's output (float) directly, or fc's dequantized sum (qoperator).
      const int p = g.value(n.inputs[0]).producer;
      ASSERT_GE(p, 0);
      EXPECT_NE(g.nodes()[static_cast<size_t>(p)].op_type, "DequantizeLinear") << "quantized before the Clip";
    }
    bool fused_note = false;
    for (const LayerReport& l : r->layers) fused_note |= l.detail.find("(Clip fused before the output QuantizeLinear)") != std::string::npos;
    EXPECT_TRUE(fused_note);
    const Tensor x = SliceBatch(calib.inputs, 0, 16);
    Tensor yf, yq;
    ASSERT_NO_FATAL_FAILURE(EmulateBoth(orig, g, x, &yf, &yq));
    const float q = OutputScale(g, "y");
    const float diff = testing::MaxAbsDiff(yf, yq);
    EXPECT_GT(diff, 0.f);
    EXPECT_LE(diff, 4 * q);
    auto fused = Session::FromGraph(g, {});
    ASSERT_TRUE(fused.ok()) << fused.status().message();
    auto yr = (*fused)->Run({{"x", x}});
    ASSERT_TRUE(yr.ok()) << yr.status().message();
    EXPECT_LE(testing::MaxAbsDiff((*yr)[0], yq), q);
  }
}

TEST(Int8Pass, DynamicStructure) {
  Graph g = SmallCnn();
  PassContext ctx;  // no calibration needed
  auto r = RunPassOnly(g, "mode=dynamic", ctx);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(CountOps(g, "DynamicQuantizeLinear"), 2);
  EXPECT_EQ(CountOps(g, "MatMulInteger"), 2);
  EXPECT_EQ(CountOps(g, "Cast"), 2);
  EXPECT_EQ(CountOps(g, "Conv"), 1);  // left float, with the reason
  const LayerReport* conv = FindLayer(*r, "conv");
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(conv->action, "skipped");
  EXPECT_NE(conv->reason.find("ConvInteger"), std::string::npos);
  for (const Node& n : g.nodes()) {
    if (n.op_type != "MatMulInteger") continue;
    const Tensor& b = *g.value(n.inputs[1]).initializer;
    const Tensor& bz = *g.value(n.inputs[3]).initializer;
    EXPECT_EQ(b.dtype(), DType::kInt8);
    EXPECT_EQ(bz.numel(), b.dim(1));  // per-column zero points, all 0
    for (int64_t i = 0; i < bz.numel(); ++i) EXPECT_EQ(bz.data<int8_t>()[i], 0);
  }
  SaveAndCheck(g, "dynamic");
  // Run it in Whittle's runtime when this build has the integer ops.
  RegisterAllOps();
  if (!OpRegistry::Global().Find("", "MatMulInteger") || !OpRegistry::Global().Find("", "DynamicQuantizeLinear")) {
    std::printf("[ int8 ] dynamic graph not run: MatMulInteger/DynamicQuantizeLinear not registered in this build\n");
    return;
  }
  Graph orig = SmallCnn();
  const Tensor x = SliceBatch(Calibration().inputs, 0, 8);
  Tensor yf, yq;
  ASSERT_NO_FATAL_FAILURE(EmulateBoth(orig, g, x, &yf, &yq));
  EXPECT_LE(testing::MaxAbsDiff(yf, yq), 0.05f);
}

}  // namespace
}  // namespace whittle
