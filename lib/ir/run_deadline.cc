#include "lib/ir/run_deadline.h"

namespace whittle {

namespace {
thread_local const RunDeadline* t_current = nullptr;
std::atomic<int64_t> g_process_ms{0};
}  // namespace

RunDeadline::RunDeadline(int64_t ms) : ms_(ms > 0 ? ms : 0), start_(Clock::now()) {
  // A budget past what the clock can add (centuries) is no deadline.
  const auto max_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::time_point::max() - start_).count();
  if (ms_ >= max_ms) ms_ = 0;
  at_ = ms_ > 0 ? start_ + std::chrono::milliseconds(ms_) : Clock::time_point::max();
}

double RunDeadline::elapsed_ms() const {
  return std::chrono::duration<double, std::milli>(Clock::now() - start_).count();
}

std::string RunDeadline::Message() const {
  return "the run took " + std::to_string(static_cast<int64_t>(elapsed_ms())) + " ms, past its time budget of " +
         std::to_string(ms_) + " ms (--max-run-time, SessionOptions::max_run_ms)";
}

const RunDeadline* CurrentRunDeadline() { return t_current; }
ScopedRunDeadline::ScopedRunDeadline(const RunDeadline* d) : prev_(t_current) { t_current = d; }
ScopedRunDeadline::~ScopedRunDeadline() { t_current = prev_; }

void SetProcessRunTimeBudget(int64_t ms) { g_process_ms.store(ms < 0 ? 0 : ms); }
int64_t ProcessRunTimeBudget() { return g_process_ms.load(); }

}  // namespace whittle
