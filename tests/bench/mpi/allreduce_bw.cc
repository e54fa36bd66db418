// (In a folder of its own: whittle_bench builds every tests/bench/*.cc, and this one needs mpi.h.)
// All-reduce bandwidth and latency of this machine's MPI, for docs/distributed-scaling.md: times
// MPI_Allreduce(MPI_IN_PLACE, float, MPI_SUM, MPI_COMM_WORLD) — the collective the data-parallel
// trainer runs on its gradients every step (runtime/training/communicator.cc; there non-blocking,
// one per bucket) — for message sizes from 4 B (the latency) and 4 KiB to 256 MiB in powers of 4,
// median of N timed repetitions after warm-up.
// Standalone: plain MPI C API, no Whittle code. Build and run with tests/bench/allreduce_bw.sh.
//
// Per size it prints
//   bytes      the message (the gradient buffer each rank holds), float32 elements x 4
//   median_us  the median over the repetitions of the slowest rank's time for one call
//   algbw      algorithm bandwidth, bytes / time (GB/s = 1e9 B/s)
//   busbw      bus bandwidth, algbw x 2(p-1)/p: the NCCL-tests convention, the bytes each rank
//              sends (and receives) in a ring all-reduce per second, comparable with a link's rate
//              whatever p is
//   min_us, max_us  the fastest and slowest repetition (the spread on a shared machine)
// and, with --fit, the least-squares fit time = a + b·bytes over the sizes >= 64 KiB, reported as
// the ring model's per-hop latency alpha = a / (2(p-1)) and bandwidth beta = 2(p-1)/p / b.
//
//   mpirun -np 2 allreduce_bw [--reps N] [--warmup W] [--max-bytes B] [--fit]
#define OMPI_SKIP_MPICXX 1  // the C API only (no C++ bindings)
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Seconds of one all-reduce of n floats, `reps` times after `warmup` untimed calls: per repetition
// the slowest rank's time (ranks enter together after a barrier).
std::vector<double> Time(float* buf, int64_t n, int warmup, int reps) {
  for (int i = 0; i < warmup; ++i) MPI_Allreduce(MPI_IN_PLACE, buf, static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    MPI_Allreduce(MPI_IN_PLACE, buf, static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double dt = MPI_Wtime() - t0, worst = 0;
    MPI_Allreduce(&dt, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    t.push_back(worst);
  }
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, p = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  int reps = 20, warmup = 5;
  bool fit = false;
  int64_t max_bytes = int64_t{256} << 20;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::max(1, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--warmup") && i + 1 < argc) warmup = std::max(0, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--max-bytes") && i + 1 < argc) max_bytes = std::atoll(argv[++i]);
    else if (!std::strcmp(argv[i], "--fit")) fit = true;
    else {
      if (rank == 0) std::fprintf(stderr, "usage: mpirun -np P %s [--reps N] [--warmup W] [--max-bytes B] [--fit]\n", argv[0]);
      MPI_Finalize();
      return 2;
    }
  }
  std::vector<int64_t> sizes = {4};  // one float: the latency
  for (int64_t b = 4096; b <= max_bytes; b *= 4) sizes.push_back(b);
  std::vector<float> buf(static_cast<size_t>(sizes.back() / 4));
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = 1e-3f * static_cast<float>(i % 1000);  // touched: no first-touch faults in the timing
  const double factor = 2.0 * (p - 1) / p;
  if (rank == 0) {
    std::printf("# MPI_Allreduce(MPI_IN_PLACE, float, MPI_SUM, MPI_COMM_WORLD), %d ranks, median of %d reps after %d warm-up\n",
                p, reps, warmup);
    std::printf("# busbw = algbw x 2(p-1)/p = algbw x %.3f (NCCL-tests convention); GB/s = 1e9 B/s\n", factor);
    std::printf("%12s %12s %12s %12s %10s %10s\n", "bytes", "median_us", "min_us", "max_us", "algbw_GB/s", "busbw_GB/s");
  }
  std::vector<double> xs, ys;
  for (int64_t bytes : sizes) {
    // Fewer repetitions of the large messages keep a run short; never fewer than 5.
    const int r = bytes >= (int64_t{64} << 20) ? std::max(5, reps / 4) : reps;
    const std::vector<double> t = Time(buf.data(), bytes / 4, bytes >= (int64_t{64} << 20) ? 1 : warmup, r);
    const double med = Median(t), mn = *std::min_element(t.begin(), t.end()), mx = *std::max_element(t.begin(), t.end());
    const double alg = static_cast<double>(bytes) / med / 1e9;
    if (rank == 0)
      std::printf("%12lld %12.2f %12.2f %12.2f %10.3f %10.3f\n", static_cast<long long>(bytes), med * 1e6, mn * 1e6, mx * 1e6, alg,
                  alg * factor);
    if (bytes >= 65536) {
      xs.push_back(static_cast<double>(bytes));
      ys.push_back(med);
    }
  }
  if (fit && rank == 0 && xs.size() >= 2 && p > 1) {
    // Ordinary least squares, weighted 1/t^2 (relative error), so the small sizes set the intercept.
    double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      const double w = 1.0 / (ys[i] * ys[i]);
      sw += w, sx += w * xs[i], sy += w * ys[i], sxx += w * xs[i] * xs[i], sxy += w * xs[i] * ys[i];
    }
    const double b = (sw * sxy - sx * sy) / (sw * sxx - sx * sx), a = (sy - b * sx) / sw;
    std::printf("# fit over >= 64 KiB: time = %.2f us + bytes / %.3f GB/s\n", a * 1e6, 1.0 / b / 1e9);
    std::printf("# ring model: alpha = a / (2(p-1)) = %.2f us per hop, beta = 2(p-1)/p / b = %.3f GB/s per link\n",
                a / (2.0 * (p - 1)) * 1e6, factor / b / 1e9);
  }
  MPI_Finalize();
  return 0;
}
