// The fine-tuning driver that finetune-model and compress-model --finetune share: the epoch loop
// around a Trainer (the student's accuracy before epoch 1, one TrainEpoch per epoch, evaluation
// after each, the best epoch's weights kept), the per-epoch history, progress lines in one
// format, and the --finetune SPEC of compress-model. Checkpoints stay with the caller, which
// gets a hook after every epoch; a run resumed from one passes in the history it had. Divergences
// are rolled back inside the epochs (TrainOptions::divergence_guard) and reported as lines; with
// lr=auto the rates come from a range test before epoch 1 (runtime/training/lr_finder.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lib/data/dataset.h"
#include "lib/ir/graph.h"
#include "lib/ir/status.h"
#include "runtime/training/lr_finder.h"
#include "runtime/training/trainer.h"

namespace whittle::training {

struct FinetuneHistory {
  std::vector<EpochStats> epochs;
  std::vector<double> eval_accuracy;  // one per epoch; -1 without eval data
  double before = -1;                 // the student's eval accuracy before epoch 1; -1 = not measured
  double best = -1;                   // best eval accuracy of an epoch; -1 = none
  int best_epoch = -1;                // 0-based
  // No epoch beat `before` on the eval data: the result is the student itself, unchanged.
  bool kept_student = false;
  // Every divergence of the run, in order (each also in its epoch's EpochStats); gave_up: the last
  // one ended training (past TrainOptions::max_rollbacks). lr_final: the peak rate at the end
  // (TrainOptions::lr's units), after the rollbacks and lr=auto.
  std::vector<Rollback> rollbacks;
  bool gave_up = false;
  float lr_final = -1;
  // lr=auto's range test (empty without it).
  std::vector<GroupRate> lr_auto;
  // The eval accuracy of the model the run gives back (-1 = not measured).
  double result_accuracy() const { return kept_student ? before : best; }
};

// How far the run is (all optional).
class FinetuneObserver {
 public:
  virtual ~FinetuneObserver() = default;
  // After every step: stage ("[epoch 2/3]"), step of steps, detail ("loss 0.41 acc 0.86 ...").
  virtual void Progress(const std::string& stage, int64_t step, int64_t steps, const std::string& detail) {
    (void)stage, (void)step, (void)steps, (void)detail;
  }
  // A permanent line: the accuracy before fine-tuning, lr=auto's rates, each divergence and its
  // rollback, one summary line per epoch.
  virtual void Line(const std::string& text) { (void)text; }
  // After epoch `epoch` (0-based) was trained, evaluated and added to `h`; `best` is the best
  // epoch's model so far (null without eval data). An error stops the run and is returned.
  virtual Status EpochDone(Trainer& t, const FinetuneHistory& h, const Graph* best, int epoch) {
    (void)t, (void)h, (void)best, (void)epoch;
    return Status::Ok();
  }
};

// What to run: `epochs` in all (the Trainer's TrainOptions::epochs), from scratch or after a
// checkpoint (first_epoch > 0 with its history and best model so far).
struct FinetuneRun {
  int epochs = 1;
  int first_epoch = 0;
  FinetuneHistory history;
  std::optional<Graph> best;
  // Measure the student's accuracy before epoch 1 (with eval data, on a fresh run only).
  bool evaluate_before = true;
};

// Trains epochs [run.first_epoch, run.epochs) on `train`, evaluating on `eval` (null:
// no evaluation) after each. Returns the model to write: the best epoch's when there is eval
// data, else the last; *history gets the whole run. With TrainOptions::lr_auto the range test
// runs first (after the accuracy before), from the trainer's state (a resumed run's too). A run
// that gave up after its rollbacks stops after that epoch (evaluated at the kept snapshot).
StatusOr<Graph> RunFinetune(Trainer& t, const Dataset& train, const Dataset* eval, FinetuneRun run,
                            FinetuneHistory* history, FinetuneObserver* observer = nullptr);

// The summary line of one epoch, as both CLIs print it:
// "[epoch 1/3] loss 0.4123 train acc 0.8612 eval acc 0.8540 5123 samples/s 1.2 s (waited 0.001 s for data)".
std::string EpochLine(const EpochStats& e, int epochs, double eval_accuracy);

// compress-model's --finetune SPEC: comma-separated key=value, keys epochs, lr (a number, or auto:
// TrainOptions::lr_auto), batch, optimizer (sgd|adamw), temperature, alpha, no-labels (0|1), seed,
// sync. Starts from `defaults`; an unknown key or a bad value is an error naming it.
StatusOr<TrainOptions> ParseFinetuneSpec(const std::string& spec, const TrainOptions& defaults);
// Data parallelism's synchronization: "ssgd" gives 0, "average:K" gives K (TrainOptions::average_every).
StatusOr<int> ParseSync(const std::string& value);
// The keys and their defaults, for --help.
std::string FinetuneSpecHelp(const TrainOptions& defaults);

}  // namespace whittle::training
