// ai.whittle BlockCirculantMatMul's CPU kernel (kernels/cpu/circulant.cc: FFTW + one packed GEMM
// per frequency bin) against the dense FP32 GEMM of the same shape with the weight packed once
// (kernels/cpu/packed_gemm.h, what a Gemm with constant weights runs at batch <= 256) and oneDNN's
// sgemm. Square N x N weights, batch M, single thread by default. Counter "dense_GMACs" is the
// dense-equivalent rate (M*N*N / time) so the rows compare directly.
// Run: whittle_bench --benchmark_filter='Circulant|DenseSquare' --benchmark_repetitions=5
//        --benchmark_report_aggregates_only=true
// Measured (AMD EPYC, Zen 4 with AVX-512, 2 shared cores; 1 thread, batch 64, median CPU time of 5;
// speedup over the packed dense GEMM):
//   N \ B      4      8     16     32     64    dense
//   256     1.06x  1.17x  0.96x  0.79x  0.64x   33 us
//   512     1.57x  1.93x  1.68x  1.63x  1.31x  131 us
//   1024    1.84x  2.64x  2.87x  3.01x  2.79x  517 us
//   2048    2.43x  3.70x  4.74x  5.91x  5.79x  2304 us
// so the FFT form pays from N = 512 at every block size, and at N = 256 only for B <= 8, barely.
// BM_TrainLayer (forward + dA + dblocks with computed blocks, against three oneDNN sgemms; batch
// 64, 1 thread, same machine, median of 5 while another build ran): N = 512: dense 461 us, B = 8
// 352 us (1.31x), B = 16 336 us (1.37x); N = 784, B = 8 (the MLP's first layer shape): 1111 vs
// 744 us (1.49x); N = 2048: 8828 us, B = 8 6400 us (1.38x), B = 16 4315 us (2.05x).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "kernels/cpu/packed_gemm.h"
#include "kernels/cpu/sgemm.h"
#include "kernels/kernel.h"

namespace whittle {
namespace {

std::vector<float> RandomVector(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

Tensor RandomTensor(const Dims& dims, uint32_t seed) {
  Tensor t(DType::kFloat32, dims);
  const std::vector<float> v = RandomVector(t.numel(), seed);
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}

void SetRate(benchmark::State& state, int64_t M, int64_t N) {
  state.counters["dense_GMACs"] =
      benchmark::Counter(static_cast<double>(M * N * N) * static_cast<double>(state.iterations()) / 1e9,
                         benchmark::Counter::kIsRate);
}

// Args: block B, N (= K), batch M, threads.
void BM_Circulant(benchmark::State& state) {
  const int64_t B = state.range(0), N = state.range(1), M = state.range(2);
  const int threads = static_cast<int>(state.range(3));
  RegisterAllKernels();
  const int64_t P = (N + B - 1) / B;
  const Tensor blocks = RandomTensor({P, P, B}, 1), bias = RandomTensor({N}, 2), x = RandomTensor({M, N}, 3);
  Tensor y(DType::kFloat32, {M, N});
  AttributeMap at;
  at.Set("block", Attribute::Int(B));
  at.Set("out_features", Attribute::Int(N));
  at.Set("in_features", Attribute::Int(N));
  const KernelInit init{at,       17, {DType::kFloat32, DType::kFloat32, DType::kFloat32}, {nullptr, &blocks, &bias}, 1,
                        "bench", Backend::kCpu};
  auto k = (*KernelRegistry::Global().Find(kWhittleDomain, "BlockCirculantMatMul"))(init);
  if (!k.ok()) {
    state.SkipWithError(k.status().message().c_str());
    return;
  }
  KernelContext ctx;
  ctx.inputs = {&x, &blocks, &bias};
  ctx.outputs = {&y};
  ctx.num_threads = threads;
  for (auto _ : state) {
    Status s = (*k)->Compute(ctx);
    benchmark::DoNotOptimize(y.data<float>());
    if (!s.ok()) state.SkipWithError(s.message().c_str());
  }
  SetRate(state, M, N);
}

// Args: backend (0: packed weights, 1: oneDNN sgemm), N (= K), batch M, threads.
void BM_DenseSquare(benchmark::State& state) {
  const int64_t N = state.range(1), M = state.range(2);
  const int threads = static_cast<int>(state.range(3));
  const std::vector<float> a = RandomVector(M * N, 1), w = RandomVector(N * N, 2), bias = RandomVector(N, 3);
  std::vector<float> c(static_cast<size_t>(M * N));
  if (state.range(0) == 0) {
    const cpu::PackedGemmB packed(w.data(), true, N, N);
    if (!packed.Valid()) {
      state.SkipWithError("no packed GEMM on this CPU");
      return;
    }
    for (auto _ : state) {
      packed.Multiply(M, a.data(), N, c.data(), N, bias.data(), false, threads);
      benchmark::DoNotOptimize(c.data());
    }
  } else {
    for (auto _ : state) {
      SgemmWith(GemmBackend::kOneDnn, false, true, M, N, N, 1.f, a.data(), N, w.data(), N, 0.f, c.data(), N, threads);
      benchmark::DoNotOptimize(c.data());
    }
  }
  SetRate(state, M, N);
}

// One training step of a layer (forward, input gradient, weight gradient), the blocks computed
// as in a training graph (not constants): the FFT form — BlockCirculantMatMul with the blocks
// transformed per call, again against the transposed reversed blocks for dA (as autodiff emits
// it; the Transpose + Gather of P*Q*B floats is left out), and BlockCirculantMatMulGradWeight —
// against the dense form's three oneDNN sgemms (Y = A W^T, dA = dY W, dW = dY^T A).
// Args: block B (0: dense), N (= K), batch M, threads.
void BM_TrainLayer(benchmark::State& state) {
  const int64_t B = state.range(0), N = state.range(1), M = state.range(2);
  const int threads = static_cast<int>(state.range(3));
  const Tensor x = RandomTensor({M, N}, 3), dy = RandomTensor({M, N}, 4);
  Tensor y(DType::kFloat32, {M, N}), dx(DType::kFloat32, {M, N});
  if (B == 0) {
    const std::vector<float> w = RandomVector(N * N, 2);
    std::vector<float> dw(static_cast<size_t>(N * N));
    for (auto _ : state) {
      SgemmWith(GemmBackend::kOneDnn, false, true, M, N, N, 1.f, x.data<float>(), N, w.data(), N, 0.f,
                y.data<float>(), N, threads);
      SgemmWith(GemmBackend::kOneDnn, false, false, M, N, N, 1.f, dy.data<float>(), N, w.data(), N, 0.f,
                dx.data<float>(), N, threads);
      SgemmWith(GemmBackend::kOneDnn, true, false, N, N, M, 1.f, dy.data<float>(), N, x.data<float>(), N, 0.f,
                dw.data(), N, threads);
      benchmark::DoNotOptimize(dw.data());
    }
    SetRate(state, 3 * M, N);
    return;
  }
  RegisterAllKernels();
  const int64_t P = (N + B - 1) / B;
  const Tensor blocks = RandomTensor({P, P, B}, 1);
  Tensor dblocks(DType::kFloat32, {P, P, B});
  AttributeMap at;
  at.Set("block", Attribute::Int(B));
  at.Set("out_features", Attribute::Int(N));
  at.Set("in_features", Attribute::Int(N));
  const KernelInit fwd_init{at, 17, {DType::kFloat32, DType::kFloat32}, {nullptr, nullptr}, 1, "bench", Backend::kCpu};
  const KernelInit grad_init{at, 17, {DType::kFloat32, DType::kFloat32}, {nullptr, nullptr}, 1, "bench", Backend::kCpu};
  auto fwd = (*KernelRegistry::Global().Find(kWhittleDomain, "BlockCirculantMatMul"))(fwd_init);
  auto gw = (*KernelRegistry::Global().Find(kWhittleDomain, "BlockCirculantMatMulGradWeight"))(grad_init);
  if (!fwd.ok() || !gw.ok()) {
    state.SkipWithError("no circulant kernels");
    return;
  }
  KernelContext f, b, g;
  f.inputs = {&x, &blocks};
  f.outputs = {&y};
  b.inputs = {&dy, &blocks};  // the transposed blocks cost the same to transform
  b.outputs = {&dx};
  g.inputs = {&dy, &x};
  g.outputs = {&dblocks};
  f.num_threads = b.num_threads = g.num_threads = threads;
  for (auto _ : state) {
    Status s1 = (*fwd)->Compute(f), s2 = (*fwd)->Compute(b), s3 = (*gw)->Compute(g);
    benchmark::DoNotOptimize(dblocks.data<float>());
    if (!s1.ok() || !s2.ok() || !s3.ok()) state.SkipWithError("compute failed");
  }
  SetRate(state, 3 * M, N);
}

void CirculantArgs(benchmark::internal::Benchmark* b) {
  for (int64_t n : {256, 512, 1024, 2048})
    for (int64_t blk : {4, 8, 16, 32, 64}) b->Args({blk, n, 64, 1});
  b->Args({16, 2048, 1, 1})->Args({16, 2048, 64, 2});
}

void DenseArgs(benchmark::internal::Benchmark* b) {
  for (int64_t be : {0, 1})
    for (int64_t n : {256, 512, 1024, 2048}) b->Args({be, n, 64, 1});
  b->Args({0, 2048, 1, 1})->Args({0, 2048, 64, 2})->Args({1, 2048, 64, 2});
}

BENCHMARK(BM_Circulant)->Apply(CirculantArgs)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DenseSquare)->Apply(DenseArgs)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_TrainLayer)
    ->ArgsProduct({{0, 8, 16}, {512, 2048}, {64}, {1}})
    ->Args({8, 784, 64, 1})
    ->Args({0, 784, 64, 1})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace whittle
