// The compression pipeline as the embedding API would call it: figures before and after, the
// output and report files written on success, and nothing at all written on failure.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "lib/data/dataset.h"
#include "lib/onnx/model_io.h"
#include "passes/pipeline.h"
#include "tests/util/scratch_dir.h"

namespace whittle {
namespace {

using testing::ScratchDir;

const std::string kMlp = std::string(WHITTLE_SOURCE_DIR) + "/models/mlp.onnx";

std::vector<std::string> Files(const std::string& dir) {
  std::vector<std::string> v;
  for (const auto& e : std::filesystem::directory_iterator(dir)) v.push_back(e.path().filename().string());
  std::sort(v.begin(), v.end());
  return v;
}

PipelineStep Step(const std::string& pass, const std::string& spec) {
  auto o = PassOptions::Parse(pass, spec);
  EXPECT_TRUE(o.ok()) << o.status().message();
  return {pass, std::move(o).value()};
}

class Recorder : public PipelineObserver {
 public:
  void Progress(const std::string& stage, int64_t, int64_t) override { stages.push_back(stage); }
  void Line(const std::string& text) override { lines.push_back(text); }
  std::vector<std::string> stages, lines;
};

TEST(Pipeline, CompressesEvaluatesAndWritesModelAndReports) {
  ScratchDir dir;
  auto eval = LoadDataset("fashion-mnist:test", 200);
  ASSERT_TRUE(eval.ok()) << eval.status().message();
  PipelineOptions o;
  o.model_path = kMlp;
  o.output_path = dir / "out.onnx";
  o.steps = {Step("svd", "rank=16")};
  o.eval_data = &*eval;
  o.eval_spec = "fashion-mnist:test";
  o.bench = false;
  o.report_json_path = dir / "r.json";
  Recorder rec;
  auto r = RunPipeline(o, &rec);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Files(dir.path()), (std::vector<std::string>{"out.onnx", "r.json"}));
  const CompressionReport& rep = r->report;
  ASSERT_EQ(rep.passes.size(), 1u);
  EXPECT_EQ(rep.passes[0].pass, "svd");
  EXPECT_LT(rep.after.params, rep.before.params);
  EXPECT_LT(rep.after.macs, rep.before.macs);
  EXPECT_GT(rep.before.accuracy, 0.5);
  EXPECT_GT(rep.after.accuracy, 0.1);
  EXPECT_EQ(rep.eval_samples, 200);
  EXPECT_EQ(rep.after.file_bytes, static_cast<int64_t>(std::filesystem::file_size(dir / "out.onnx")));
  EXPECT_LT(rep.before.latency_p50_ms, 0);  // not benchmarked
  // The written model is the returned graph.
  auto back = LoadModel(dir / "out.onnx");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->nodes().size(), r->graph.nodes().size());
  // Progress named the evaluation and the pass.
  bool saw_eval = false;
  for (const auto& s : rec.stages) saw_eval = saw_eval || s.rfind("[eval] original model", 0) == 0;
  EXPECT_TRUE(saw_eval);
  ASSERT_FALSE(rec.lines.empty());
  EXPECT_EQ(rec.lines[0].rfind("[svd] done in ", 0), 0u) << rec.lines[0];
}

TEST(Pipeline, FailureWritesNothing) {
  ScratchDir dir;
  std::ofstream(dir / "out.onnx") << "keep me";
  PipelineOptions o;
  o.model_path = kMlp;
  o.output_path = dir / "out.onnx";
  o.bench = false;
  // A bad name fails inside the pass, after the model was loaded and evaluated.
  o.steps = {Step("svd", "rank=8,exclude=nosuch")};
  auto r = RunPipeline(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'nosuch'"), std::string::npos) << r.status().message();
  // A report path that cannot be written fails after the model went to its temporary file.
  o.steps = {Step("svd", "rank=8")};
  o.report_html_path = dir / (std::string(300, 'r') + ".html");
  r = RunPipeline(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(Files(dir.path()), (std::vector<std::string>{"out.onnx"}));
  std::ifstream in(dir / "out.onnx");
  std::string kept((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(kept, "keep me");
}

TEST(Pipeline, UnknownPassIsRefusedBeforeLoading) {
  PipelineOptions o;
  o.model_path = "/nonexistent.onnx";
  o.output_path = "/tmp/never.onnx";
  o.steps = {{"nosuch", PassOptions()}};
  EXPECT_FALSE(CheckPipelineSteps(o.steps).ok());
  auto r = RunPipeline(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message().find("/nonexistent.onnx"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace whittle

namespace whittle {
namespace {

// A fully convolutional export with free height and width: MACs are only meaningful once the
// dims are pinned (--input-shape), and the written model keeps them free.
TEST(Pipeline, PinnedInputDimsCountMacsAndStayFreeInTheOutput) {
  ScratchDir dir;
  PipelineOptions o;
  o.model_path = std::string(WHITTLE_SOURCE_DIR) + "/tests/corpus/mobilenet_dynamic_hw_op13.onnx";
  o.output_path = dir / "out.onnx";
  o.steps = {Step("svd", "rank=8")};
  o.bench = false;
  auto free_run = RunPipeline(o);
  ASSERT_TRUE(free_run.ok()) << free_run.status().message();
  ASSERT_EQ(free_run->report.notes.size(), 1u);
  EXPECT_NE(free_run->report.notes[0].find("free dims"), std::string::npos) << free_run->report.notes[0];
  o.input_shapes["input"] = {1, 3, 64, 64};
  auto pinned = RunPipeline(o);
  ASSERT_TRUE(pinned.ok()) << pinned.status().message();
  EXPECT_GT(pinned->report.before.macs, 100 * free_run->report.before.macs);
  EXPECT_LT(pinned->report.after.macs, pinned->report.before.macs);
  auto back = LoadModel(dir / "out.onnx");
  ASSERT_TRUE(back.ok()) << back.status().message();
  const SymShape& s = *back->value(back->inputs()[0]).shape;
  EXPECT_FALSE(s[2].known());
  EXPECT_FALSE(s[3].known());
  o.input_shapes = {{"nosuch", {1}}};
  EXPECT_FALSE(RunPipeline(o).ok());
}

}  // namespace
}  // namespace whittle

namespace whittle {
namespace {

// nn.TransformerEncoderLayer exports fold the batch into the heads ([seq, batch*heads, dim]), which
// static inference cannot resolve; the MACs come from one sample run through the model.
TEST(Pipeline, AttentionMacsComeFromAnObservedSampleWhereInferenceCannotResolve) {
  ScratchDir dir;
  PipelineOptions o;
  o.model_path = std::string(WHITTLE_SOURCE_DIR) + "/tests/corpus/torch_encoder_int64_op17.onnx";
  o.output_path = dir / "out.onnx";
  o.steps = {Step("svd", "rank=8")};
  o.bench = false;
  auto r = RunPipeline(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  int attention = 0;
  for (const LayerReport& l : r->report.passes[0].layers) {
    if (l.node != "/enc/self_attn/MatMul_1" && l.node != "/enc/self_attn/MatMul_2") continue;
    ++attention;
    EXPECT_EQ(l.macs_before, 4 * 12 * 12 * 8) << l.node;  // heads x seq x seq x head dim
  }
  EXPECT_EQ(attention, 2);
}

}  // namespace
}  // namespace whittle
