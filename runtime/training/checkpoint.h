// Checkpoint and resume of a fine-tuning run (RunFinetune), for finetune-model --checkpoint-dir /
// --resume and any library user: after every epoch a folder epoch_<n>/ (model.onnx with the
// current weights, best.onnx, param_<k>.npy and the optimizer's opt_<k>_m.npy / _v.npy) and then
// state.json, written last and atomically, naming the folder it belongs to; a run killed while a
// folder is written resumes from the one before. A resumed run ends with the weights an
// uninterrupted run with the same options and data would have: state.json also holds what the
// run decided along the way — the divergence guard's rollbacks and the rate's factor they left
// (a run resumed after a rollback goes on at the lowered rate), lr=auto's rates (the base rate
// and the per-param multipliers; a resumed lr=auto run does not run its range test again) — and
// the history's rollbacks, gave_up, lr_final and lr=auto groups. A checkpoint written before
// these fields existed loads with their defaults (no rollback, factor 1, no saved rates).
// Not saved: the divergence guard's moving average and reference (DivergenceGuard keeps them
// private), so a resumed run's guard starts afresh at the resumed epoch; the weights differ only
// if that changes whether a later step counts as a divergence.
#pragma once

#include <optional>
#include <string>
#include <vector>

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
  // The divergence guard's rollbacks so far and the rate's factor they left (Trainer::
  // SetRollbackState).
  int rollbacks = 0;
  float lr_factor = 1.f;
  // The trainer's base rate (TrainOptions::lr's units) and per-param multipliers (params() order;
  // empty: 1 for every param) when the run chose them itself (lr=auto); nullopt otherwise or in
  // an older checkpoint.
  std::optional<float> lr_auto_lr;
  std::vector<float> lr_auto_scales;
};
// nullopt when dir holds no checkpoint (no state.json); an error when it holds a broken one.
StatusOr<std::optional<Checkpoint>> ReadCheckpoint(const std::string& dir);

// Puts the checkpoint's params, optimizer state and rollback state (the count and the lowered
// rate's factor) into t (created from c.model with the options of the interrupted run) and
// returns the FinetuneRun that continues it to `epochs` in all. With TrainOptions::lr_auto and a
// checkpoint that holds lr=auto's rates, t gets those rates and lr_auto is turned off in t
// (Trainer::set_lr_auto), so RunFinetune does not run the range test again; the history keeps
// the groups' rates. An error when the checkpoint does not belong to this student (shapes or
// the number of params differ).
StatusOr<FinetuneRun> ResumeFinetune(Checkpoint c, Trainer& t, int epochs);

// The history's epochs as JSON text, as state.json and the reports give them: [{epoch (1-based),
// loss, train_accuracy, eval_accuracy, samples_per_s, seconds, data_wait_s}], unmeasured
// accuracies null.
std::string EpochsJsonText(const FinetuneHistory& h);

}  // namespace whittle::training
