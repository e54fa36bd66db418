// The divergence guard of a fine-tuning run (issue 45): decides, step by step from the loss
// alone, whether training has diverged — a loss that is not finite, or a moving average of the
// loss that has climbed far above the lowest it reached — and when the trainer's state is healthy
// enough to snapshot. Pure arithmetic on the step losses; the Trainer owns the snapshots and the
// rollback (Trainer::TrainEpoch), and every rank of a data-parallel job sees the same (global)
// losses, so every rank decides alike.
#pragma once

#include <cstdint>
#include <string>

namespace whittle::training {

// One divergence and what the trainer did about it.
struct Rollback {
  int epoch = 0;           // 0-based
  int64_t step = 0;        // the step of the epoch that diverged (1-based)
  double loss = 0;         // the smoothed loss that crossed the line (inf or NaN: not finite)
  double was = 0;          // the lowest smoothed loss before it (the reference)
  int64_t to_step = 0;     // steps of the epoch kept: the snapshot rolled back to
  float lr_before = 0, lr_after = 0;  // the peak rate (for batch 256, as TrainOptions::lr)
  bool gave_up = false;    // past the rollback limit: training stopped at the snapshot
};

// "diverged at step 312 of epoch 1 (loss 9.9, was 0.41): rolled back to step 256, lr 0.05 -> 0.005".
std::string RollbackLine(const Rollback& r);

class DivergenceGuard {
 public:
  // factor: the smoothed loss may reach factor times its reference (the lowest smoothed loss, or
  // the first step's loss before `warm_in` steps) before it is divergence.
  explicit DivergenceGuard(double factor = 4.0, int warm_in = 5) : factor_(factor), warm_in_(warm_in) {}
  // The next step's loss (finite: its gradients were too). True: diverged (the state is not
  // changed by a divergent loss, so a rollback may restore a copy of the guard or go on with it).
  bool Diverged(double loss, bool finite = true);
  // Whether the latest step left the run healthy enough to snapshot: the smoothed loss within
  // twice its reference (a snapshot taken while the loss climbs would be rolled back to in vain).
  bool Healthy() const;
  double smoothed() const { return ema_; }
  double reference() const { return ref_; }
  // The smoothed loss a divergent step would have given (for the report).
  double last_seen() const { return last_; }

 private:
  double factor_;
  int warm_in_;
  int64_t steps_ = 0;
  double ema_raw_ = 0, ema_ = 0, ref_ = 0, last_ = 0;
};

}  // namespace whittle::training
