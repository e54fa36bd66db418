// ParallelFor: the one loop-parallelism helper the CPU kernels share. Runs body(i) for i in
// [0, n) on an OpenMP team when threads > 1, else inline (entering an OpenMP region sets up a team
// even when its `if` clause is false, which small ops notice). Chunks are handed out dynamically
// (about 8 per thread) so a thread the OS delays does not hold back a fixed share of the work.
// The TSan build (WHITTLE_SANITIZE=thread defines WHITTLE_NO_OPENMP, see docs/reliability.md) has
// no OpenMP: libgomp's barriers are invisible to TSan, so there the chunks run on std::threads.
// Under a run's time budget (lib/ir/run_deadline.h) each chunk first checks the deadline and is
// skipped once it has passed; the executor then fails the run, so the skipped work is never seen.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "lib/ir/run_deadline.h"
#ifdef WHITTLE_NO_OPENMP
#include <atomic>
#include <thread>
#include <vector>
#endif

namespace whittle {

template <class Body>
void ParallelFor(int64_t n, int threads, const Body& body) {
  const RunDeadline* deadline = CurrentRunDeadline();
  if (threads <= 1 || n <= 1) {
    if (!deadline) {
      for (int64_t i = 0; i < n; ++i) body(i);
      return;
    }
    // Inline, the deadline is read once per eighth of the work.
    const int64_t step = std::max<int64_t>(1, n / 8);
    for (int64_t b = 0; b < n && !deadline->Expired(); b += step)
      for (int64_t i = b, e = std::min(n, b + step); i < e; ++i) body(i);
    return;
  }
  const int64_t chunk = std::max<int64_t>(1, n / (8 * static_cast<int64_t>(threads)));
  const int64_t nchunks = (n + chunk - 1) / chunk;
  auto run_chunk = [&](int64_t c) {
    if (deadline && deadline->Expired()) return;
    for (int64_t i = c * chunk, e = std::min(n, i + chunk); i < e; ++i) body(i);
  };
#ifdef WHITTLE_NO_OPENMP
  // The same dynamic chunking on plain threads (the caller is one of them), so TSan sees every
  // hand-off: thread start, the atomic counter and join.
  std::atomic<int64_t> next{0};
  auto work = [&] {
    for (int64_t c; (c = next.fetch_add(1)) < nchunks;) run_chunk(c);
  };
  std::vector<std::thread> team;
  team.reserve(static_cast<size_t>(threads - 1));
  for (int t = 1; t < threads; ++t) team.emplace_back(work);
  work();
  for (std::thread& t : team) t.join();
#else
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
  for (int64_t c = 0; c < nchunks; ++c) run_chunk(c);
#endif
}

// Sets the calling thread's OpenMP team size for the duration of one library call (oneDNN and
// Eigen size their teams with omp_get_max_threads()); the setting is per thread, so concurrent
// callers do not disturb each other.
class ScopedOmpThreads {
 public:
#ifdef WHITTLE_NO_OPENMP
  // TSan build: oneDNN (built on libgomp) runs on the calling thread.
  explicit ScopedOmpThreads(int) : prev_(omp_get_max_threads()) { omp_set_num_threads(1); }
#else
  explicit ScopedOmpThreads(int n) : prev_(omp_get_max_threads()) { omp_set_num_threads(std::max(1, n)); }
#endif
  ~ScopedOmpThreads() { omp_set_num_threads(prev_); }
  ScopedOmpThreads(const ScopedOmpThreads&) = delete;
  ScopedOmpThreads& operator=(const ScopedOmpThreads&) = delete;

 private:
  int prev_;
};

}  // namespace whittle
