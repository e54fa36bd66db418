// Checkpoint and resume of a fine-tuning run (RunFinetune), for finetune-model --checkpoint-dir /
// --resume and any library user: after every epoch a folder epoch_<n>/ (model.onnx with the
// current weights, best.onnx, param_<k>.npy and the optimizer's opt_<k>_m.npy / _v.npy) and then
// state.json, written last and atomically, naming the folder it belongs to; a run killed while a
// folder is written resumes from the one before. A resumed run ends with the weights an
// uninterrupted run with the same options and data would have.
#pragma once

#include <optional>
#include <string>

#include "lib/ir/graph.h"
#include "lib/ir/status.h"
#include "runtime/training/finetune.h"
#include "runtime/training/trainer.h"

namespace whittle::training {

// Writes the checkpoint after epoch `epoch_done` (0-based) into dir (created if missing): the
// trainer's weights and optimizer state (downloaded from a device), the best model so far (null:
// none), and the history. The previous epoch's folder is removed once state.json names the new one.
Status SaveCheckpoint(const std::string& dir, Trainer& t, const Graph* best, const FinetuneHistory& h, int epoch_done);

// A FinetuneObserver that writes a checkpoint into dir after every epoch and passes everything on
// to `inner` (null: nothing else to tell), whose EpochDone comes after the checkpoint is written.
class CheckpointWriter : public FinetuneObserver {
 public:
  CheckpointWriter(std::string dir, FinetuneObserver* inner) : dir_(std::move(dir)), inner_(inner) {}
  void Progress(const std::string& stage, int64_t step, int64_t steps, const std::string& detail) override;
  void Line(const std::string& text) override;
  Status EpochDone(Trainer& t, const FinetuneHistory& h, const Graph* best, int epoch) override;

 private:
  std::string dir_;
  FinetuneObserver* inner_;
};

// The last checkpoint of a directory, read before a Trainer exists: the student with the
// checkpoint's weights (create the Trainer from it), the best model so far, and the run's state.
struct Checkpoint {
  std::string dir, folder;  // folder: the epoch_<n> path state.json names
  Graph model;
  std::optional<Graph> best;
  int epoch_done = -1;  // 0-based
  int64_t optimizer_steps = 0;
  FinetuneHistory history;
};
// nullopt when dir holds no checkpoint (no state.json); an error when it holds a broken one.
StatusOr<std::optional<Checkpoint>> ReadCheckpoint(const std::string& dir);

// Puts the checkpoint's params and optimizer state into t (created from c.model with the options
// of the interrupted run) and returns the FinetuneRun that continues it to `epochs` in all. An
// error when the checkpoint does not belong to this student (shapes differ).
StatusOr<FinetuneRun> ResumeFinetune(Checkpoint c, Trainer& t, int epochs);

// The history's epochs as JSON text, as state.json and the reports give them: [{epoch (1-based),
// loss, train_accuracy, eval_accuracy, samples_per_s, seconds, data_wait_s}], unmeasured
// accuracies null.
std::string EpochsJsonText(const FinetuneHistory& h);

}  // namespace whittle::training
