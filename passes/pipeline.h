// The compression pipeline, for compress-model and anything else that compresses a model
// (finetune-model, the embedding API, an accuracy-aware search): load and infer the model,
// evaluate it, run the passes (PassManager), evaluate the result, benchmark both side by side,
// optionally fine-tune the result by distillation from the original (runtime/training), assemble
// the CompressionReport (with its fine-tune section), and write the model and the report files.
// Everything that can fail happens before anything is committed: the model is staged beside the
// output (StageModel) and renamed into place last, so a failure leaves no output and no temporary.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lib/data/dataset.h"
#include "lib/ir/graph.h"
#include "passes/pass_options.h"
#include "passes/report/finetune_report.h"
#include "passes/report/report.h"
#include "passes/search/search.h"
#include "runtime/training/trainer.h"

namespace whittle {

// One pass of the pipeline: its registry name and (merged) options.
struct PipelineStep {
  std::string pass;
  PassOptions options;
};

// Fine-tuning after the passes: the compressed model is distilled from the original model (the
// teacher) on train_data, evaluated on the pipeline's eval data after each epoch (the best
// epoch's weights kept), and written instead of the passes' result.
struct PipelineFinetune {
  training::TrainOptions options;
  const Dataset* train_data = nullptr;  // required
  std::string spec, train_spec;         // as given, for the report
};

struct PipelineOptions {
  std::string model_path;   // ONNX model to compress
  std::string output_path;  // where the result goes (written only on success)
  std::vector<PipelineStep> steps;
  // Data for accuracy before and after (null: not measured), and its spec for the report. Without
  // labels, accuracy is top-1 agreement with the original model (per position for a decoder).
  const Dataset* eval_data = nullptr;
  std::string eval_spec;
  // Samples for data-driven passes (null: none), and its spec for the report.
  const Dataset* calibration = nullptr;
  std::string calibration_spec;
  int threads = 1;
  uint64_t seed = 1234;
  int stop_after = -1;  // run only the first N passes (< 0: all)
  // Latency benchmark of the original and the result, alternating rounds (best median counts).
  bool bench = true;
  int64_t bench_batch = 64;
  double bench_seconds = 1.0;
  int bench_iterations = 20;
  int bench_rounds = 2;
  // Free (symbolic) non-batch dims of graph inputs pinned for the cost model and the passes'
  // decisions (name -> full dims; the batch entry is ignored). Inputs not named here take them
  // from the first eval or calibration sample when there is one. The written model keeps its
  // declared (free) dims.
  std::map<std::string, Dims> input_shapes;
  // Report files written with the model ("" = none); both are written before the model commits.
  std::string report_json_path, report_html_path;
  // Replace the ai.whittle ops the passes wrote by standard ONNX ops (passes/lowering.h) before
  // measuring and writing, so that other runtimes run the result.
  bool portable = false;
  bool portable_dense = false;  // circulant layers as the expanded dense MatMul, not the DFT form
  // Tensors of at least this many bytes go to `OUT.data` beside the output (SaveOptions); < 0:
  // automatic, inline unless the model would pass protobuf's 2 GiB limit.
  int64_t external_data_threshold = -1;
  std::optional<PipelineFinetune> finetune;
  // The accuracy-aware search (passes/search) instead of fixed steps: the steps' specs, if any,
  // are the base options of their families. With finetune, every candidate the search evaluates is
  // fine-tuned first, and the chosen one's fine-tuning is the report's. calibration, eval,
  // threads, seed, fingerprint and recover are filled in by the pipeline.
  std::optional<search::SearchOptions> search;
  // false: everything but the writing (the model and the report files): the ranks other than 0
  // of a data-parallel fine-tuning, which compute the same model.
  bool write = true;
};

// Where the pipeline tells how far it is (all optional; compress-model draws a progress bar).
class PipelineObserver {
 public:
  virtual ~PipelineObserver() = default;
  // Long work under way: stage ("[svd] sensitivity", "[eval] original model"), done of total
  // (total <= 0: no count).
  virtual void Progress(const std::string& stage, int64_t done, int64_t total) { (void)stage, (void)done, (void)total; }
  // A training step of the fine-tuning ("[finetune] [epoch 1/2]", step of steps, "loss 0.41 ...");
  // by default Progress without the detail.
  virtual void StepProgress(const std::string& stage, int64_t step, int64_t steps, const std::string& detail) {
    (void)detail;
    Progress(stage, step, steps);
  }
  // A permanent line ("[svd] done in 0.42 s").
  virtual void Line(const std::string& text) { (void)text; }
  // The stage being shown is over.
  virtual void Clear() {}
};

struct PipelineResult {
  Graph graph;               // the compressed (and fine-tuned) model, as written
  CompressionReport report;  // with every figure that was measured
  std::optional<FinetuneReport> finetune;  // with PipelineOptions::finetune
};

// Checks the steps (unknown pass, bad options) without loading anything.
Status CheckPipelineSteps(const std::vector<PipelineStep>& steps);

StatusOr<PipelineResult> RunPipeline(const PipelineOptions& options, PipelineObserver* observer = nullptr);

}  // namespace whittle
