// CPU kernel benchmarks for the small CNN's layers (Conv 3x3 pad 1 + Relu with constant weights,
// MaxPool 2x2) at batch 1 and 64 on 1 and 2 threads, reported in GFLOP/s (Conv) or GB/s read
// (MaxPool). Kernels are built once (weights prepacked) and Compute is timed alone.
// Run: whittle_bench --benchmark_filter='Conv|MaxPool' --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "kernels/cpu/conv.h"
#include "kernels/cpu/conv_onednn.h"
#include "kernels/cpu/winograd.h"
#include "runtime/node_runner.h"

namespace whittle {
namespace {

Tensor Random(const Dims& dims, uint32_t seed) {
  Tensor t(DType::kFloat32, dims);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = d(rng);
  return t;
}

Node MakeOp(const std::string& op, int inputs, AttributeMap attrs) {
  Node n;
  n.name = "bench_" + op;
  n.op_type = op;
  n.attrs = std::move(attrs);
  for (int i = 0; i < inputs; ++i) n.inputs.push_back(i);
  n.outputs.push_back(inputs);
  return n;
}

// Runs Compute of a kernel built with every input but the first constant.
void RunKernel(benchmark::State& state, const Node& n, const std::vector<Tensor>& in, Tensor& out, int threads) {
  std::vector<DType> dts;
  std::vector<const Tensor*> consts, ptrs;
  for (size_t i = 0; i < in.size(); ++i) {
    dts.push_back(in[i].dtype());
    consts.push_back(i == 0 ? nullptr : &in[i]);
    ptrs.push_back(&in[i]);
  }
  auto kernel = CreateKernel(n, 17, Backend::kCpu, dts, consts);
  if (!kernel.ok()) {
    state.SkipWithError(kernel.status().message().c_str());
    return;
  }
  KernelContext ctx{ptrs, {&out}, threads};
  for (auto _ : state) {
    Status st = (*kernel)->Compute(ctx);
    if (!st.ok()) {
      state.SkipWithError(st.message().c_str());
      break;
    }
    benchmark::DoNotOptimize(out.raw_data());
    benchmark::ClobberMemory();
  }
}

// Args: batch, in channels, out channels, spatial size, threads, path (cpu::ConvPath: 0 measured,
// 1 im2col + Sgemm, 2 oneDNN, 3 direct).
void BM_Conv3x3Relu(benchmark::State& state) {
  const int64_t n = state.range(0), cin = state.range(1), cout = state.range(2), hw = state.range(3);
  const int threads = static_cast<int>(state.range(4));
  cpu::SetConvPath(static_cast<cpu::ConvPath>(state.range(5)));
  AttributeMap a;
  a.Set("pads", Attribute::Ints({1, 1, 1, 1}));
  a.Set("_activation", Attribute::String("Relu"));
  const std::vector<Tensor> in = {Random({n, cin, hw, hw}, 1), Random({cout, cin, 3, 3}, 2), Random({cout}, 3)};
  Tensor out(DType::kFloat32, {n, cout, hw, hw});
  RunKernel(state, MakeOp("Conv", 3, a), in, out, threads);
  cpu::SetConvPath(cpu::ConvPath::kAuto);
  state.counters["GFLOPS"] = benchmark::Counter(2e-9 * static_cast<double>(n * cout * cin * 9 * hw * hw),
                                                benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Conv3x3Relu)
    ->ArgNames({"N", "Cin", "Cout", "HW", "thr", "path"})
    ->ArgsProduct({{1, 64}, {1}, {16}, {28}, {1, 2}, {1, 2, 3}})
    ->ArgsProduct({{1, 64}, {16}, {16}, {28}, {1, 2}, {1, 2, 3}})
    ->ArgsProduct({{1, 64}, {16}, {32}, {14}, {1, 2}, {1, 2, 3}})
    ->ArgsProduct({{1, 64}, {32}, {32}, {14}, {1, 2}, {1, 2, 3}})
    ->UseRealTime();

// The blocked layout's 3x3 pad-1 conv + Relu (what NchwcConv runs, on the block oneDNN prefers on
// this CPU): Winograd F(2x2, 3x3) against oneDNN's direct kernel on the same tensors. GFLOP/s
// counts the direct convolution's multiply-adds for both. Args: batch, in channels, out channels,
// spatial size, threads, path (0 Winograd, 1 oneDNN).
void BM_BlockedConv3x3Relu(benchmark::State& state) {
  const int64_t n = state.range(0), cin = state.range(1), cout = state.range(2), hw = state.range(3);
  const int threads = static_cast<int>(state.range(4));
  const int block = cpu::OneDnnPreferredBlock().value_or(8);
  const Tensor x = Random({n, cin, hw, hw}, 1), w = Random({cout, cin, 3, 3}, 2), b = Random({cout}, 3);
  WindowAttrs a;
  a.pads = {1, 1, 1, 1};
  ConvShape s;
  if (!ResolveConvShape(a, 1, x, w, &b, &s).ok()) return state.SkipWithError("shape");
  Tensor y(DType::kFloat32, {n, cout, hw, hw});  // the same bytes as the blocked output
  FusedActivation relu;
  relu.kind = FusedActivation::kRelu;
  cpu::WinogradConv wino(w.data<float>(), b.data<float>(), cout, cin);
  cpu::OneDnnConv dnn(w.data<float>(), b.data<float>(), relu);
  const cpu::OneDnnConvLayout layout{true, block, false};
  if (state.range(5) == 0 && !wino.Applies(s, block)) return state.SkipWithError("Winograd does not apply here");
  for (auto _ : state) {
    if (state.range(5) == 0) {
      wino.Run(s, block, x.data<float>(), nullptr, relu, threads, y.data<float>());
    } else if (!dnn.Run(s, x.data<float>(), nullptr, y.data<float>(), threads, layout)) {
      state.SkipWithError("oneDNN has no blocked kernel here");
      break;
    }
    benchmark::DoNotOptimize(y.raw_data());
    benchmark::ClobberMemory();
  }
  state.SetLabel("block " + std::to_string(block));
  state.counters["GFLOPS"] = benchmark::Counter(2e-9 * static_cast<double>(n * cout * cin * 9 * hw * hw),
                                                benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_BlockedConv3x3Relu)
    ->ArgNames({"N", "Cin", "Cout", "HW", "thr", "path"})
    ->ArgsProduct({{1, 64}, {16}, {16}, {28}, {1, 2}, {0, 1}})
    ->ArgsProduct({{1, 64}, {16}, {32}, {14}, {1, 2}, {0, 1}})
    ->ArgsProduct({{1, 64}, {32}, {32}, {14}, {1, 2}, {0, 1}})
    ->ArgsProduct({{1, 64}, {64}, {64}, {14}, {1, 2}, {0, 1}})
    ->ArgsProduct({{1, 64}, {128}, {128}, {7}, {1, 2}, {0, 1}})
    // ImageNet-sized ResNet stages at batch 1 (224 and 128 pixel inputs): few tiles per GEMM.
    ->ArgsProduct({{1}, {64}, {64}, {56, 32}, {1}, {0, 1}})
    ->ArgsProduct({{1, 16}, {128}, {128}, {28, 16}, {1}, {0, 1}})
    ->ArgsProduct({{1, 16}, {256}, {256}, {14, 8}, {1}, {0, 1}})
    ->ArgsProduct({{1}, {512}, {512}, {7, 4}, {1}, {0, 1}})
    ->UseRealTime();

// Args: batch, channels, spatial size, threads.
void BM_MaxPool2x2(benchmark::State& state) {
  const int64_t n = state.range(0), c = state.range(1), hw = state.range(2);
  const int threads = static_cast<int>(state.range(3));
  AttributeMap a;
  a.Set("kernel_shape", Attribute::Ints({2, 2}));
  a.Set("strides", Attribute::Ints({2, 2}));
  const std::vector<Tensor> in = {Random({n, c, hw, hw}, 1)};
  Tensor out(DType::kFloat32, {n, c, hw / 2, hw / 2});
  RunKernel(state, MakeOp("MaxPool", 1, a), in, out, threads);
  state.counters["GBps"] = benchmark::Counter(4e-9 * static_cast<double>(n * c * hw * hw),
                                              benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_MaxPool2x2)
    ->ArgNames({"N", "C", "HW", "thr"})
    ->ArgsProduct({{1, 64}, {16}, {28}, {1, 2}})
    ->ArgsProduct({{1, 64}, {32}, {14}, {1, 2}})
    ->UseRealTime();

}  // namespace
}  // namespace whittle
