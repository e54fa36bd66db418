// Times the SVDs the --svd pass runs (passes/svd/linalg_eigen.h, the exact code the pass
// uses): the full BDCSVD against the randomized top-k SVD (oversampling 16, 2 power
// iterations) on large weight-sized matrices, square 4096x4096 and wide 1024x4096.
// Run: whittle_bench --benchmark_filter=Svd
// The pass's algo=auto picks the randomized SVD when min(m,n) >= 512 and the needed rank is at
// most a quarter of it; these figures are why.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>

#include "passes/svd/linalg_eigen.h"

namespace whittle {
namespace {

// A trained-weight-like matrix: a decaying spectrum plus noise (the cost barely depends on it).
svd_eigen::MatrixF WeightLike(int64_t m, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> gauss(0.f, 1.f);
  const int64_t k = 64;
  svd_eigen::MatrixF a(m, k), b(k, n), noise(m, n);
  for (int64_t j = 0; j < k; ++j)
    for (int64_t i = 0; i < m; ++i) a(i, j) = gauss(rng) / static_cast<float>(1 + j);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < k; ++i) b(i, j) = gauss(rng);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < m; ++i) noise(i, j) = 0.05f * gauss(rng);
  return a * b + noise;
}

// Args: m, n.
void BM_SvdFull(benchmark::State& state) {
  const svd_eigen::MatrixF w = WeightLike(state.range(0), state.range(1), 1);
  for (auto _ : state) {
    svd_eigen::EigenSvd r = svd_eigen::FullSvd(w);
    benchmark::DoNotOptimize(r.s.data());
  }
}

// Args: m, n, k.
void BM_SvdRandomized(benchmark::State& state) {
  const svd_eigen::MatrixF w = WeightLike(state.range(0), state.range(1), 1);
  for (auto _ : state) {
    svd_eigen::EigenSvd r = svd_eigen::RandomizedSvd(w, state.range(2), 16, 2, 1234);
    benchmark::DoNotOptimize(r.s.data());
  }
}

BENCHMARK(BM_SvdFull)->Args({1024, 4096})->Args({4096, 4096})->Unit(benchmark::kSecond)->Iterations(1);
BENCHMARK(BM_SvdRandomized)
    ->Args({1024, 4096, 128})
    ->Args({1024, 4096, 256})
    ->Args({4096, 4096, 128})
    ->Args({4096, 4096, 512})
    ->Unit(benchmark::kSecond)
    ->Iterations(1);

}  // namespace
}  // namespace whittle
