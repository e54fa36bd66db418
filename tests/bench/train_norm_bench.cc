// Training-mode BatchNormalization and Dropout kernels, reference against CPU, float32 on 1 and 2
// threads, reported as GB/s of X read. Kernels are built once; Compute is timed alone.
// Run: whittle_bench --benchmark_filter='BatchNormTrain|DropoutTrain'
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "runtime/node_runner.h"

namespace whittle {
namespace {

Tensor Random(const Dims& dims, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  Tensor t(DType::kFloat32, dims);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = d(rng);
  return t;
}

Node MakeOp(const std::string& op, int inputs, int outputs, AttributeMap attrs) {
  Node n;
  n.name = "bench_" + op;
  n.op_type = op;
  n.attrs = std::move(attrs);
  for (int i = 0; i < inputs; ++i) n.inputs.push_back(i);
  for (int i = 0; i < outputs; ++i) n.outputs.push_back(inputs + i);
  return n;
}

void RunKernel(benchmark::State& state, const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out,
               Backend backend, int threads) {
  std::vector<DType> dts;
  std::vector<const Tensor*> consts, ptrs;
  for (size_t i = 0; i < in.size(); ++i) {
    dts.push_back(in[i].dtype());
    consts.push_back(i == 0 ? nullptr : &in[i]);
    ptrs.push_back(&in[i]);
  }
  auto kernel = CreateKernel(n, 15, backend, dts, consts);
  if (!kernel.ok()) {
    state.SkipWithError(kernel.status().message().c_str());
    return;
  }
  std::vector<Tensor*> outs;
  for (Tensor& t : out) outs.push_back(&t);
  KernelContext ctx{ptrs, outs, threads};
  for (auto _ : state) {
    Status st = (*kernel)->Compute(ctx);
    if (!st.ok()) {
      state.SkipWithError(st.message().c_str());
      break;
    }
    benchmark::DoNotOptimize(out[0].raw_data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * in[0].nbytes());
}

// Args: N, C, H*W, backend (0 reference, 1 CPU), threads.
void BM_BatchNormTrain(benchmark::State& state) {
  const int64_t n = state.range(0), c = state.range(1), hw = state.range(2);
  AttributeMap a;
  a.Set("training_mode", Attribute::Int(1));
  std::vector<Tensor> in = {Random({n, c, hw}, 1), Random({c}, 2), Random({c}, 3), Random({c}, 4),
                            Random({c}, 5, 0.5f, 2.f)};
  std::vector<Tensor> out = {Tensor(DType::kFloat32, {n, c, hw}), Tensor(DType::kFloat32, {c}),
                             Tensor(DType::kFloat32, {c})};
  RunKernel(state, MakeOp("BatchNormalization", 5, 3, a), in, out, static_cast<Backend>(state.range(3)),
            static_cast<int>(state.range(4)));
}

// Args: elements, backend, threads.
void BM_DropoutTrain(benchmark::State& state) {
  AttributeMap a;
  a.Set("seed", Attribute::Int(1));
  std::vector<Tensor> in = {Random({state.range(0)}, 1), Tensor::Scalar<float>(0.3f), Tensor::Scalar<bool>(true)};
  std::vector<Tensor> out = {Tensor(DType::kFloat32, {state.range(0)}), Tensor(DType::kBool, {state.range(0)})};
  RunKernel(state, MakeOp("Dropout", 3, 2, a), in, out, static_cast<Backend>(state.range(1)),
            static_cast<int>(state.range(2)));
}

BENCHMARK(BM_BatchNormTrain)
    ->Args({64, 16, 784, 0, 1})
    ->Args({64, 16, 784, 1, 1})
    ->Args({64, 16, 784, 1, 2})
    ->Args({1, 1, 1 << 20, 1, 2})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DropoutTrain)->Args({1 << 20, 0, 1})->Args({1 << 20, 1, 1})->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace whittle
