// A time budget for one run of a model (SessionOptions::max_run_ms, the CLIs' --max-run-time): a
// hostile model whose shapes are small enough to hold can still ask for hours of arithmetic (an
// image dim of 100,000 made one Conv take 11 s). The executor checks the deadline before and
// after every node; the CPU kernels' parallel loops (ParallelFor) check it between chunks of
// work and skip the rest once it has passed, so a long kernel stops within about one chunk (an
// eighth of its work per thread, or less). The run then fails with a DeadlineExceeded error
// naming the node; the skipped work's outputs are never returned. A library call that does not
// go through ParallelFor (oneDNN, Eigen, cuBLAS) runs to its end and is noticed when it returns.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

namespace whittle {

class RunDeadline {
 public:
  using Clock = std::chrono::steady_clock;
  // ms <= 0: no deadline (active() false, Expired() never true).
  explicit RunDeadline(int64_t ms);
  bool active() const { return ms_ > 0; }
  int64_t budget_ms() const { return ms_; }
  double elapsed_ms() const;
  // Reads the clock; once true it stays true (every thread of a parallel loop sees the same).
  bool Expired() const {
    if (!active()) return false;
    if (expired_.load(std::memory_order_relaxed)) return true;
    if (Clock::now() < at_) return false;
    expired_.store(true, std::memory_order_relaxed);
    return true;
  }
  // "the run took 2013 ms, past its budget of 2000 ms (--max-run-time, SessionOptions::max_run_ms)"
  std::string Message() const;

 private:
  int64_t ms_;
  Clock::time_point start_, at_;
  mutable std::atomic<bool> expired_{false};
};

// The deadline of the run the calling thread is executing (null: none). The executor installs
// its run's for the run's duration; ParallelFor reads it on the calling thread and hands it to its
// workers. Nested scopes restore the outer deadline.
const RunDeadline* CurrentRunDeadline();
// Whether the calling thread's run is past its deadline: for a kernel's own long loops (the
// reference DFT's O(N^2) sums), which stop early; the executor then fails the run.
inline bool RunDeadlinePassed() {
  const RunDeadline* d = CurrentRunDeadline();
  return d != nullptr && d->Expired();
}
class ScopedRunDeadline {
 public:
  explicit ScopedRunDeadline(const RunDeadline* d);
  ~ScopedRunDeadline();
  ScopedRunDeadline(const ScopedRunDeadline&) = delete;
  ScopedRunDeadline& operator=(const ScopedRunDeadline&) = delete;

 private:
  const RunDeadline* prev_;
};

// The process's default, for sessions whose SessionOptions::max_run_ms is 0: none (0) unless a
// tool sets one (the CLIs' --max-run-time; the fuzz targets), as for the memory budget.
void SetProcessRunTimeBudget(int64_t ms);
int64_t ProcessRunTimeBudget();

}  // namespace whittle
