// finetune-model's work, shared by the CLI and the Python module (python/src): its flags' values
// turned into TrainOptions (ApplyFinetuneFlags), then load the student and the teacher, prepare
// the trainer (resuming from a checkpoint), train, and write the model and the HTML report, and
// the --json object. The steps are separate so that the caller loads the data between loading the
// models and preparing (the CLI's order of errors) and knows which failure happened in training
// (where a data-parallel job aborts its other ranks). Errors are one line and name the CLI's flags.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/data/dataset.h"
#include "lib/ir/graph.h"
#include "lib/ir/status.h"
#include "passes/report/finetune_report.h"
#include "runtime/training/finetune.h"
#include "runtime/training/trainer.h"

namespace whittle {

// The flags of finetune-model that are not a TrainOptions field as they are.
struct FinetuneFlags {
  std::string lr = "0.05";  // a number > 0, or auto
  std::string optimizer = "sgd", device = "cpu", precision = "fp32", batchnorm = "train";
  std::vector<std::string> hints;  // STUDENT_TENSOR[=TEACHER_TENSOR]
  bool no_labels = false, no_rollback = false, no_lr_scaling = false, no_cosine = false;
  bool no_teacher_cache = false, fixed_scales = false;
  bool has_teacher = false;
  bool resume = false;
  std::string checkpoint_dir;
};

// Sets the fields of *o the flags decide and checks them together (--lr, --precision without
// cuda, --hint, --resume without --checkpoint-dir, distillation without --teacher).
Status ApplyFinetuneFlags(const FinetuneFlags& f, training::TrainOptions* o);

struct FinetuneModelOptions {
  std::string student_path, teacher_path, output_path;
  training::TrainOptions train;  // its comm: one rank of a data-parallel job (rank 0 writes)
  std::string train_spec, eval_spec;  // as given, for the report
  std::string checkpoint_dir;    // "" = no checkpoints
  bool resume = false;           // continue from the last checkpoint in checkpoint_dir
  std::string report_html_path;  // "" = none
  std::string command_line;      // for the report
  int64_t external_data_threshold = -1;  // SaveOptions; < 0 automatic (external data in, external data out)
  // With train.comm: what every rank must agree on (the command line), checked with the sizes of
  // what it loaded before any step.
  std::string launch_id;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();  // the report's seconds
};

struct FinetuneModels {
  Graph student;
  std::optional<Graph> teacher;
};
// Registers the ops and loads the student and (when a path is given) the teacher.
StatusOr<FinetuneModels> LoadFinetuneModels(const std::string& student_path, const std::string& teacher_path);

// A trainer ready to run, with the models it was made from.
struct FinetuneJob {
  FinetuneModels models;
  std::unique_ptr<training::Trainer> trainer;
  training::FinetuneRun run;            // consumed by RunFinetuneJob
  training::FinetuneHistory history;    // filled by RunFinetuneJob
};
// Reads the checkpoint (resume), checks the launch across ranks, creates the trainer and restores
// the checkpoint's state; observer (may be null) gets the lines finetune-model prints before training.
StatusOr<std::unique_ptr<FinetuneJob>> PrepareFinetune(FinetuneModels models, const FinetuneModelOptions& o,
                                                       const Dataset& train, training::FinetuneObserver* observer);

// Trains (RunFinetune) into job.history, writing a checkpoint after every epoch with checkpoint_dir
// on rank 0. Returns the model to write.
StatusOr<Graph> RunFinetuneJob(FinetuneJob& job, const FinetuneModelOptions& o, const Dataset& train,
                               const Dataset* eval, training::FinetuneObserver* observer);

struct FinetuneModelResult {
  training::FinetuneHistory history;
  // output_params and output_file_bytes always; the rest (and the teacher's accuracy) with a report.
  FinetuneReport report;
  size_t params = 0;                        // the trainer's params
  std::vector<std::string> fallback_nodes;  // training graph nodes on the CPU (device backends)
};
// Writes `model` (and the HTML report) atomically: both are committed only when everything succeeded.
StatusOr<FinetuneModelResult> WriteFinetuneOutput(const FinetuneJob& job, const Graph& model,
                                                  const FinetuneModelOptions& o, const Dataset& train,
                                                  const Dataset* eval);

// finetune-model --json's object.
nlohmann::json FinetuneModelJson(const FinetuneModelOptions& o, const FinetuneModelResult& r);

}  // namespace whittle
