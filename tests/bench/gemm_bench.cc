// Compares the Sgemm backends (Eigen, oneDNN, and the auto policy that picks one per call) on the shapes Whittle's models use: MLP layers
// at batch 1 and 64 (both weight layouts), square matrices, and the per-image and whole-batch
// im2col GEMMs of the small CNN. Reports GFLOP/s (counter "GFLOPS") so runs compare with peak.
// Run: whittle_bench --benchmark_filter=Sgemm --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "kernels/cpu/sgemm.h"

namespace whittle {
namespace {

std::vector<float> RandomVector(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

// Args: backend, M, N, K, trans_b, threads.
void BM_Sgemm(benchmark::State& state) {
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
    for (int be : {0, 1, 2}) {
      // MLP 784-256-128-10 at batch 1 and 64; trans_b=1 is the PyTorch export layout [N,K].
      for (int64_t m : {1, 64})
        for (auto kn : {std::pair<int64_t, int64_t>{784, 256}, {256, 128}, {128, 10}})
          for (int tb : {0, 1}) b->Args({be, m, kn.second, kn.first, tb, thr});
      for (int64_t s : {256, 512, 1024}) b->Args({be, s, s, s, 0, thr});
      // Small CNN im2col GEMMs: [out_ch, k*k*in_ch] x [k*k*in_ch, H*W (x batch)].
      b->Args({be, 16, 784, 9, 0, thr});
      b->Args({be, 32, 196, 144, 0, thr});
      b->Args({be, 16, 784 * 64, 9, 0, thr});
      b->Args({be, 32, 196 * 64, 144, 0, thr});
    }
  }
}

BENCHMARK(BM_Sgemm)->Apply(GemmShapes)->UseRealTime();

}  // namespace
}  // namespace whittle
