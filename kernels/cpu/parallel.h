// ParallelFor: the one loop-parallelism helper the CPU kernels share. Runs body(i) for i in
// [0, n) on an OpenMP team when threads > 1, else inline (entering an OpenMP region sets up a team
// even when its `if` clause is false, which small ops notice). Chunks are handed out dynamically
// (about 8 per thread) so a thread the OS delays does not hold back a fixed share of the work.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>

namespace whittle {

template <class Body>
void ParallelFor(int64_t n, int threads, const Body& body) {
  if (threads <= 1 || n <= 1) {
    for (int64_t i = 0; i < n; ++i) body(i);
    return;
  }
  const int64_t chunk = std::max<int64_t>(1, n / (8 * static_cast<int64_t>(threads)));
#pragma omp parallel for num_threads(threads) schedule(dynamic, chunk)
  for (int64_t i = 0; i < n; ++i) body(i);
}

// Sets the calling thread's OpenMP team size for the duration of one library call (oneDNN and
// Eigen size their teams with omp_get_max_threads()); the setting is per thread, so concurrent
// callers do not disturb each other.
class ScopedOmpThreads {
 public:
  explicit ScopedOmpThreads(int n) : prev_(omp_get_max_threads()) { omp_set_num_threads(std::max(1, n)); }
  ~ScopedOmpThreads() { omp_set_num_threads(prev_); }
  ScopedOmpThreads(const ScopedOmpThreads&) = delete;
  ScopedOmpThreads& operator=(const ScopedOmpThreads&) = delete;

 private:
  int prev_;
};

}  // namespace whittle
