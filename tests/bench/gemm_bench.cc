// Compares the Sgemm backends (Eigen, oneDNN, and the auto policy that picks one per call) and the
// packed-weight GEMM (be 3, kernels/cpu/packed_gemm.h) on the shapes Whittle's models use: MLP layers
// at batch 1 and 64 (both weight layouts), square matrices, and the per-image and whole-batch
// im2col GEMMs of the small CNN. Reports GFLOP/s (counter "GFLOPS") so runs compare with peak.
// Run: whittle_bench --benchmark_filter=Sgemm --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/packed_gemm.h"
#include "kernels/cpu/sgemm.h"
#include "kernels/cpu/vmath.h"

namespace whittle {
namespace {

std::vector<float> RandomVector(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

// Args: backend (GemmBackend, or 3: packed weights), M, N, K, trans_b, threads.
void BM_Sgemm(benchmark::State& state) {
  if (state.range(0) == 3) {
    const int64_t M = state.range(1), N = state.range(2), K = state.range(3);
    const bool trans_b = state.range(4) != 0;
    const std::vector<float> a = RandomVector(M * K, 1), b = RandomVector(K * N, 2);
    std::vector<float> c(static_cast<size_t>(M * N));
    const cpu::PackedGemmB packed(b.data(), trans_b, K, N);
    for (auto _ : state) {
      packed.Multiply(M, a.data(), K, c.data(), N, nullptr, false, static_cast<int>(state.range(5)));
      benchmark::DoNotOptimize(c.data());
      benchmark::ClobberMemory();
    }
    state.SetLabel(std::string("packed ") + cpu::SimdIsaName(packed.isa()) + (trans_b ? " NT" : " NN"));
    state.counters["GFLOPS"] =
        benchmark::Counter(2e-9 * static_cast<double>(M * N * K), benchmark::Counter::kIsIterationInvariantRate);
    return;
  }
  const auto backend = static_cast<GemmBackend>(state.range(0));
  const int64_t M = state.range(1), N = state.range(2), K = state.range(3);
  const bool trans_b = state.range(4) != 0;
  const int threads = static_cast<int>(state.range(5));
  const std::vector<float> a = RandomVector(M * K, 1), b = RandomVector(K * N, 2);
  std::vector<float> c(static_cast<size_t>(M * N));
  for (auto _ : state) {
    SgemmWith(backend, false, trans_b, M, N, K, 1.f, a.data(), K, b.data(), trans_b ? K : N, 0.f, c.data(), N,
              threads);
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  state.SetLabel(std::string(GemmBackendName(backend)) + (trans_b ? " NT" : " NN"));
  state.counters["GFLOPS"] =
      benchmark::Counter(2e-9 * static_cast<double>(M * N * K), benchmark::Counter::kIsIterationInvariantRate);
}

void GemmShapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"be", "M", "N", "K", "tB", "thr"});
  for (int thr : {1, 2}) {
    for (int be : {0, 1, 2, 3}) {
      // MLP 784-256-128-10 at batch 1 and 64; trans_b=1 is the PyTorch export layout [N,K].
      for (int64_t m : {1, 64})
        for (auto kn : {std::pair<int64_t, int64_t>{784, 256}, {256, 128}, {128, 10}})
          for (int tb : {0, 1}) b->Args({be, m, kn.second, kn.first, tb, thr});
      for (int64_t s : {256, 512, 1024}) b->Args({be, s, s, s, 0, thr});
      // The patch transformer's projections (192 wide, MLP 384) at batch 1 and 64 (16 tokens each).
      for (int64_t m : {16, 1024})
        for (auto kn : {std::pair<int64_t, int64_t>{192, 576}, {192, 192}, {192, 384}, {384, 192}})
          b->Args({be, m, kn.second, kn.first, 0, thr});
      // Narrow classifier heads (N < 16: 10 classes, 2 for a binary one; BERT's 768 -> 2), the
      // shapes PackedGemmPreferred's column rule is about.
      for (int64_t m : {1, 32, 256})
        for (auto kn : {std::pair<int64_t, int64_t>{128, 10}, {512, 10}, {768, 2}})
          b->Args({be, m, kn.second, kn.first, 1, thr});
      // Small CNN im2col GEMMs: [out_ch, k*k*in_ch] x [k*k*in_ch, H*W (x batch)].
      b->Args({be, 16, 784, 9, 0, thr});
      b->Args({be, 32, 196, 144, 0, thr});
      b->Args({be, 16, 784 * 64, 9, 0, thr});
      b->Args({be, 32, 196 * 64, 144, 0, thr});
    }
  }
}

BENCHMARK(BM_Sgemm)->Apply(GemmShapes)->UseRealTime();

std::string CpuModel() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

// This machine's peak float FLOP/s on `threads` threads: the best of 5 runs of an FMA loop per
// thread on the widest ISA in use (WHITTLE_ISA caps it).
double PeakGflops(int threads) {
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    double flops_total = 0;
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : flops_total)
    {
      double flops = 0;
      benchmark::DoNotOptimize(cpu::FmaLoop(cpu::ActiveSimdIsa(), 20'000'000, &flops));
      flops_total += flops;
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, 1e-9 * flops_total / s);
  }
  return best;
}

// The GEMM roofline: Sgemm (the default backend policy) on square N x N x N against the measured
// peak; counters GFLOPS, peak_GFLOPS and of_peak (fraction), label = CPU model and ISAs.
// Run: whittle_bench --benchmark_filter=GemmRoofline
void BM_GemmRoofline(benchmark::State& state) {
  const int64_t n = state.range(0);
  const int threads = static_cast<int>(state.range(1));
  const std::vector<float> a = RandomVector(n * n, 1), b = RandomVector(n * n, 2);
  std::vector<float> c(static_cast<size_t>(n * n));
  double seconds = 0;
  int64_t iters = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    Sgemm(false, false, n, n, n, 1.f, a.data(), n, b.data(), n, 0.f, c.data(), n, threads);
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ++iters;
  }
  const double gflops = 2e-9 * static_cast<double>(n * n * n) * static_cast<double>(iters) / seconds;
  const double peak = PeakGflops(threads);
  state.counters["GFLOPS"] = gflops;
  state.counters["peak_GFLOPS"] = peak;
  state.counters["of_peak"] = gflops / peak;
  state.SetLabel(CpuModel() + ", vector ISA " + cpu::SimdIsaName(cpu::ActiveSimdIsa()) + ", oneDNN ISA cap " +
                 (std::getenv("ONEDNN_MAX_CPU_ISA") ? std::getenv("ONEDNN_MAX_CPU_ISA") : "none"));
}
BENCHMARK(BM_GemmRoofline)->ArgNames({"n", "thr"})->Args({256, 1})->Args({1024, 1})->Args({256, 2})->Args({1024, 2})
    ->UseRealTime();

}  // namespace
}  // namespace whittle
