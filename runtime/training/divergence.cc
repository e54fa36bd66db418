#include "runtime/training/divergence.h"

#include <algorithm>
#include <cmath>

#include "lib/ir/format.h"

namespace whittle::training {
namespace {

// The moving average's weight of the past: about ten steps' memory, enough to ride out one hard
// batch and short enough to catch a climb within a few dozen steps.
constexpr double kBeta = 0.9;
// Below this absolute rise (in loss units, nats) nothing is divergence: a loss near zero may
// double with the batch's luck.
constexpr double kMargin = 0.1;

}  // namespace

std::string RollbackLine(const Rollback& r) {
  std::string s = "diverged at step " + std::to_string(r.step) + " of epoch " + std::to_string(r.epoch + 1) + " (loss " +
                  (std::isfinite(r.loss) ? Fmt("%.4g", r.loss) : std::string("not finite")) + ", was " +
                  Fmt("%.4g", r.was) + "): ";
  if (r.gave_up)
    return s + "gave up (rollback limit reached), kept the state of step " + std::to_string(r.to_step) + " at lr " +
           Fmt("%g", r.lr_before);
  return s + "rolled back to step " + std::to_string(r.to_step) + ", lr " + Fmt("%g", r.lr_before) + " -> " +
         Fmt("%g", r.lr_after);
}

bool DivergenceGuard::Diverged(double loss, bool finite) {
  if (!finite || !std::isfinite(loss)) {
    last_ = std::isnan(loss) ? loss : HUGE_VAL;
    return true;
  }
  const double raw = kBeta * ema_raw_ + (1 - kBeta) * loss;
  const double ema = raw / (1 - std::pow(kBeta, static_cast<double>(steps_ + 1)));  // bias-corrected
  last_ = ema;
  if (steps_ > 0 && ema > factor_ * ref_ && ema - ref_ > kMargin) return true;
  ema_raw_ = raw;
  ema_ = ema;
  // The reference: the first step's loss, then (once the average has seen a few steps) the
  // lowest average.
  if (steps_ == 0) ref_ = loss;
  else if (steps_ + 1 >= warm_in_) ref_ = std::min(ref_, ema);
  ++steps_;
  return false;
}

bool DivergenceGuard::Healthy() const { return steps_ == 0 || ema_ <= 2 * ref_ || ema_ - ref_ <= kMargin / 2; }

}  // namespace whittle::training
