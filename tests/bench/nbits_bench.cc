// com.microsoft MatMulNBits (4-bit codes, blocks of 32 with zero points; kernels/cpu/nbits.cc) on
// one decoder MLP shape (K 2048, N 5632), in float arithmetic and with accuracy_level 4 (int8
// activations, AVX512-VNNI where the CPU has it), against the float32 product of the same matrix (Sgemm, the
// auto policy: Eigen's GEMV at M 1) at M = 1 (a decode step) and M = 8 (a short prompt), on 1 and
// 2 threads. The label gives the weight bytes each call streams; bytes/s is the decode figure
// that matters (both are bound by memory at M = 1).
// Run: whittle_bench --benchmark_filter=NBits --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/sgemm.h"
#include "lib/ir/domain.h"
#include "lib/ir/graph.h"
#include "whittle/session.h"

namespace whittle {
namespace {

Tensor Random(const Dims& d, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  Tensor t(DType::kFloat32, d);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

Tensor Bytes(const Dims& d, uint32_t seed) {
  std::mt19937 rng(seed);
  Tensor t(DType::kUInt8, d);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<uint8_t>()[i] = static_cast<uint8_t>(rng());
  return t;
}

// A one-node model: y = MatMulNBits(x [M, K]) with random codes, scales and packed zero points.
// accuracy_level 4 lets the kernel quantize x to int8 per block (AVX512-VNNI).
std::unique_ptr<Session> NBitsSession(int64_t K, int64_t N, int threads, int accuracy_level, uint32_t seed = 1) {
  const int64_t block = 32, nb = K / block;
  Graph g;
  g.opset_imports[""] = 21;
  g.opset_imports[kMicrosoftDomain] = 1;
  const int x = g.AddValue("x", DType::kFloat32, SymShape{Dim::Symbol("m"), K});
  g.inputs().push_back(x);
  Tensor scales = Random({N, nb}, 3);
  for (int64_t i = 0; i < scales.numel(); ++i) scales.data<float>()[i] = 0.01f + 0.001f * std::abs(scales.data<float>()[i]);
  Node n;
  n.name = "nbits";
  n.op_type = "MatMulNBits";
  n.domain = kMicrosoftDomain;
  n.inputs = {x, g.AddInitializer("b", Bytes({N, nb, block / 2}, seed)), g.AddInitializer("s", scales),
              g.AddInitializer("z", Bytes({N, (nb + 1) / 2}, seed + 1))};
  n.outputs = {g.AddValue("y")};
  n.attrs.Set("K", Attribute::Int(K));
  n.attrs.Set("N", Attribute::Int(N));
  n.attrs.Set("bits", Attribute::Int(4));
  n.attrs.Set("block_size", Attribute::Int(block));
  n.attrs.Set("accuracy_level", Attribute::Int(accuracy_level));
  g.AddNode(n);
  g.outputs().push_back(n.outputs[0]);
  SessionOptions so;
  so.num_threads = threads;
  auto s = Session::FromGraph(std::move(g), so);
  return s.ok() ? std::move(*s) : nullptr;
}

// Args: mode (0 MatMulNBits, 1 float32 Sgemm, 2 MatMulNBits accuracy_level 4), M, threads.
void BM_NBits(benchmark::State& state) {
  const int mode = static_cast<int>(state.range(0));
  const int64_t M = state.range(1), K = 2048, N = 5632;
  const int threads = static_cast<int>(state.range(2));
  const Tensor a = Random({M, K}, 7);
  double bytes = 0;
  if (mode != 1) {
    std::unique_ptr<Session> s = NBitsSession(K, N, threads, mode == 2 ? 4 : 0);
    if (!s) {
      state.SkipWithError("the MatMulNBits model did not load");
      return;
    }
    for (auto _ : state) benchmark::DoNotOptimize(s->Run({{"x", a}}));
    bytes = static_cast<double>(N * K / 2 + N * (K / 32) * 4 + N * (K / 64));
    state.SetLabel(std::string(mode == 2 ? "int4 MatMulNBits accuracy_level 4, " : "int4 MatMulNBits, ") + std::to_string(static_cast<int64_t>(bytes)) + " weight bytes");
  } else {
    const Tensor w = Random({N, K}, 8);
    Tensor y(DType::kFloat32, {M, N});
    for (auto _ : state) {
      Sgemm(false, true, M, N, K, 1.f, a.data<float>(), K, w.data<float>(), K, 0.f, y.data<float>(), N, threads);
      benchmark::ClobberMemory();
    }
    bytes = static_cast<double>(N * K * 4);
    state.SetLabel("fp32 Sgemm, " + std::to_string(static_cast<int64_t>(bytes)) + " weight bytes");
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes) * state.iterations());
}
BENCHMARK(BM_NBits)
    ->ArgsProduct({{0, 1, 2}, {1, 8}, {1, 2}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Decode from memory rather than cache: M = 1 through 48 different matrices of the shape above
// (355 MB of 4-bit weights, past this CPU's 300 MB L3; 2.2 GB as float32 over 48 Sgemm weights),
// one call each per iteration, as a decode step streams a model's layers.
// Args: mode (0 MatMulNBits, 1 float32 Sgemm, 2 MatMulNBits accuracy_level 4), threads.
void BM_NBitsStream(benchmark::State& state) {
  const int mode = static_cast<int>(state.range(0));
  const int64_t K = 2048, N = 5632, count = 48;
  const int threads = static_cast<int>(state.range(1));
  const Tensor a = Random({1, K}, 7);
  double bytes = 0;
  if (mode != 1) {
    std::vector<std::unique_ptr<Session>> s;
    for (int64_t i = 0; i < count; ++i) {
      s.push_back(NBitsSession(K, N, threads, mode == 2 ? 4 : 0, static_cast<uint32_t>(10 + 2 * i)));
      if (!s.back()) {
        state.SkipWithError("the MatMulNBits model did not load");
        return;
      }
    }
    for (auto _ : state)
      for (const auto& si : s) benchmark::DoNotOptimize(si->Run({{"x", a}}));
    bytes = static_cast<double>(count * (N * K / 2 + N * (K / 32) * 4 + N * (K / 64)));
  } else {
    std::vector<Tensor> w;
    for (int64_t i = 0; i < count; ++i) w.push_back(Random({N, K}, static_cast<uint32_t>(100 + i)));
    Tensor y(DType::kFloat32, {1, N});
    for (auto _ : state) {
      for (const Tensor& wi : w)
        Sgemm(false, true, 1, N, K, 1.f, a.data<float>(), K, wi.data<float>(), K, 0.f, y.data<float>(), N, threads);
      benchmark::ClobberMemory();
    }
    bytes = static_cast<double>(count * N * K * 4);
  }
  state.SetLabel(mode == 1 ? "fp32 Sgemm" : mode == 2 ? "int4 accuracy_level 4" : "int4");
  state.SetBytesProcessed(static_cast<int64_t>(bytes) * state.iterations());
}
BENCHMARK(BM_NBitsStream)->ArgsProduct({{0, 1, 2}, {2}})->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace whittle
