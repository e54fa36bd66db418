// Int8 GEMM backends against the FP32 Sgemm on the bundled models' shapes: the MLP layers at batch
// 64 (64x784x256, 64x256x128, 64x128x10), the CNN's im2col GEMMs over a batch of 64 images
// (conv1 16x9x(784*64), conv2 32x144x(196*64)) and its fc1 (64x1568x128). "own" is the whole int8
// layer as the CPU kernel runs it (pack A, prepacked B, u8 output with the fused epilogue);
// "onednn" is dnnl_gemm_u8s8s32 plus the same epilogue; "fp32" is Sgemm (auto backend), C only.
// Counter "exact" says whether the backend's int32 accumulators equal the reference loops' on
// full-range random data (oneDNN on AVX2 without VNNI may saturate int16 pair sums).
// BM_QLayer times whole CPU kernels (weights prepacked at creation, Compute alone) for the CNN
// convs (3x3 pad 1 + Relu) and the fc layers: ai.whittle QConv/QGemm (u8 in, u8 out) against the
// float Conv/Gemm kernels with the same fused Relu, batch 64.
// Run: whittle_bench --benchmark_filter=QGemm --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/qgemm.h"
#include "runtime/node_runner.h"
#include "kernels/cpu/sgemm.h"
#include "kernels/reference/qlinear.h"

namespace whittle {
namespace {

// own-int8: the int16 kernel; own8-int8: the u8 x s8 byte kernel (weights in [-63, 63], as
// reduce-range=1 makes them, so it is exact with or without VNNI).
enum Impl { kOwn = 0, kOneDnn = 1, kFp32 = 2, kOwn8 = 3 };
const char* ImplName(int i) {
  return i == kOwn ? "own-int8" : i == kOneDnn ? "onednn-int8" : i == kOwn8 ? "own8-int8" : "fp32-sgemm";
}

template <class T>
std::vector<T> RandomInts(int64_t n, int lo, int hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<T> v(static_cast<size_t>(n));
  for (T& x : v) x = static_cast<T>(d(rng));
  return v;
}

QOutput U8Output(int64_t N) {
  QOutput o;
  o.kind = QOutput::Kind::kQuantized;
  o.dtype = DType::kUInt8;
  o.zero_point = 0;
  o.relu = true;
  o.qmin = 0;
  o.qmax = 255;
  o.multiplier.assign(static_cast<size_t>(N), 1e-4f);
  o.bias.assign(static_cast<size_t>(N), 100);
  return o;
}

// Args: impl, M, N, K, threads.
void BM_QGemm(benchmark::State& state) {
  const int impl = static_cast<int>(state.range(0));
  const int64_t M = state.range(1), N = state.range(2), K = state.range(3);
  const int threads = static_cast<int>(state.range(4));
  const auto a = RandomInts<uint8_t>(M * K, 0, 255, 1);
  const auto b = impl == kOwn8 ? RandomInts<int8_t>(K * N, -63, 63, 2) : RandomInts<int8_t>(K * N, -128, 127, 2);
  const std::vector<int32_t> a_zp{128}, b_zp{0};
  const QMatrix am{a.data(), DType::kUInt8, K, &a_zp}, bm{b.data(), DType::kInt8, N, &b_zp};
  const QOutput out = U8Output(N);
  std::vector<uint8_t> y(static_cast<size_t>(M * N));
  std::vector<int32_t> acc(static_cast<size_t>(M * N));
  double exact = 1;
  if (impl == kOwn) {
    QPackedB pb;
    QPackB(bm, K, N, &pb, threads);
    // Exactness of the accumulators (int32 output) on a bounded slice of the shape.
    const int64_t m_chk = std::min<int64_t>(M, 8);
    std::vector<int32_t> want(static_cast<size_t>(m_chk * N)), got(want.size());
    QGemmAccReference(am, bm, m_chk, N, K, want.data());
    QPackedA pa_chk;
    QPackA(am, m_chk, K, &pa_chk);
    QGemmPacked(pa_chk, pb, Int32QOutput(), false, 0, got.data(), N, threads);
    exact = want == got ? 1 : 0;
    for (auto _ : state) {
      QPackedA pa;
      QPackA(am, M, K, &pa, threads);
      QGemmPacked(pa, pb, out, false, 0, y.data(), N, threads);
      benchmark::DoNotOptimize(y.data());
      benchmark::ClobberMemory();
    }
  } else if (impl == kOwn8) {
    if (!Q8WeightsFit(b.data(), N, K, true, b_zp)) {
      state.SkipWithError("weights do not fit the byte kernel");
      return;
    }
    QPacked8 pb;
    Q8PackWeightsB(b.data(), K, N, &pb);
    const int64_t m_chk = std::min<int64_t>(M, 8);
    std::vector<int32_t> want(static_cast<size_t>(m_chk * N)), got(want.size());
    QGemmAccReference(am, bm, m_chk, N, K, want.data());
    QPacked8 pa_chk;
    Q8PackActivationsA(a.data(), m_chk, K, K, 0, &pa_chk, 1);
    QGemmPacked8(pa_chk, pb, false, a_zp[0], Int32QOutput(), false, 0, got.data(), N, threads);
    exact = want == got ? 1 : 0;
    for (auto _ : state) {
      QPacked8 pa;
      Q8PackActivationsA(a.data(), M, K, K, 0, &pa, threads);
      QGemmPacked8(pa, pb, false, a_zp[0], out, false, 0, y.data(), N, threads);
      benchmark::DoNotOptimize(y.data());
      benchmark::ClobberMemory();
    }
  } else if (impl == kOneDnn) {
    const int64_t m_chk = std::min<int64_t>(M, 8);
    std::vector<int32_t> want(static_cast<size_t>(m_chk * N));
    QGemmAccReference(am, bm, m_chk, N, K, want.data());
    if (!QGemmAccOneDnn(am, bm, M, N, K, acc.data(), threads)) {
      state.SkipWithError("oneDNN int8 GEMM failed");
      return;
    }
    exact = std::equal(want.begin(), want.end(), acc.begin()) ? 1 : 0;
    for (auto _ : state) {
      QGemmAccOneDnn(am, bm, M, N, K, acc.data(), threads);
      QEpilogueCpu(out, acc.data(), M, N, false, 0, y.data(), N, threads);
      benchmark::DoNotOptimize(y.data());
      benchmark::ClobberMemory();
    }
  } else {
    std::vector<float> af(a.begin(), a.end()), bf(b.begin(), b.end()), c(static_cast<size_t>(M * N));
    for (auto _ : state) {
      Sgemm(false, false, M, N, K, 1.f, af.data(), K, bf.data(), N, 0.f, c.data(), N, threads);
      benchmark::DoNotOptimize(c.data());
      benchmark::ClobberMemory();
    }
  }
  state.SetLabel(ImplName(impl));
  state.counters["exact"] = exact;
  state.counters["GOPS"] =
      benchmark::Counter(2e-9 * static_cast<double>(M * N * K), benchmark::Counter::kIsIterationInvariantRate);
}

void QGemmShapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"impl", "M", "N", "K", "thr"});
  const std::vector<std::vector<int64_t>> shapes = {
      {64, 256, 784}, {64, 128, 256}, {64, 10, 128},  // MLP fc1..fc3, batch 64
      {64, 128, 1568},                                // CNN fc1
      {16, 784 * 64, 9}, {32, 196 * 64, 144},         // CNN conv1 / conv2 im2col, 64 images
  };
  for (int thr : {1, 2})
    for (const auto& s : shapes)
      for (int impl : {kOwn, kOwn8, kOneDnn, kFp32}) b->Args({impl, s[0], s[1], s[2], thr});
}

BENCHMARK(BM_QGemm)->Apply(QGemmShapes)->UseRealTime();

Tensor Bytes(DType dt, const Dims& dims, uint32_t seed) {
  Tensor t(dt, dims);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(dt == DType::kUInt8 ? 0 : -128, dt == DType::kUInt8 ? 255 : 127);
  for (int64_t i = 0; i < t.numel(); ++i) static_cast<uint8_t*>(t.raw_data())[i] = static_cast<uint8_t>(d(rng));
  return t;
}

// int8 weights in [-63, 63], what --int8 emits (reduce-range): the byte kernel is exact for them
// on every CPU.
Tensor ReducedWeights(const Dims& dims, uint32_t seed) {
  Tensor t = Bytes(DType::kInt8, dims, seed);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<int8_t>()[i] = static_cast<int8_t>(std::max(-63, t.data<int8_t>()[i] / 2));
  return t;
}

Tensor Floats(const Dims& dims, uint32_t seed) {
  Tensor t(DType::kFloat32, dims);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = d(rng);
  return t;
}

// Args: int8 (1) or float (0), layer (0 conv1, 1 conv2, 2 cnn fc1, 3 mlp fc1), threads.
void BM_QLayer(benchmark::State& state) {
  const bool int8 = state.range(0) != 0;
  const int layer = static_cast<int>(state.range(1));
  const int threads = static_cast<int>(state.range(2));
  const bool conv = layer < 2;
  const int64_t batch = 64;
  const int64_t cin = layer == 0 ? 1 : 16, cout = layer == 0 ? 16 : 32, hw = layer == 0 ? 28 : 14;
  const int64_t K = layer == 2 ? 1568 : 784, N = layer == 2 ? 128 : 256;
  Node n;
  n.name = "bench";
  n.attrs.Set("_activation", Attribute::String("Relu"));
  if (conv) n.attrs.Set("pads", Attribute::Ints({1, 1, 1, 1}));
  std::vector<Tensor> in;
  if (int8) {
    n.domain = "ai.whittle";
    n.op_type = conv ? "QConv" : "QGemm";
    const Dims x_dims = conv ? Dims{batch, cin, hw, hw} : Dims{batch, K};
    const Dims w_dims = conv ? Dims{cout, cin, 3, 3} : Dims{K, N};
    const int64_t channels = conv ? cout : N;
    std::vector<float> ws(static_cast<size_t>(channels), 0.01f);
    in = {Bytes(DType::kUInt8, x_dims, 1), Tensor::Scalar<float>(0.02f), Tensor::Scalar<uint8_t>(120),
          ReducedWeights(w_dims, 2), Tensor::FromVector<float>({channels}, ws),
          Tensor::FromVector<int8_t>({channels}, std::vector<int8_t>(static_cast<size_t>(channels), 0)),
          Tensor::Scalar<float>(0.05f), Tensor::Scalar<uint8_t>(0),
          Tensor::FromVector<int32_t>({channels}, std::vector<int32_t>(static_cast<size_t>(channels), 7))};
  } else {
    n.op_type = conv ? "Conv" : "Gemm";
    in = {Floats(conv ? Dims{batch, cin, hw, hw} : Dims{batch, K}, 1),
          Floats(conv ? Dims{cout, cin, 3, 3} : Dims{K, N}, 2), Floats({conv ? cout : N}, 3)};
  }
  for (size_t i = 0; i < in.size(); ++i) n.inputs.push_back(static_cast<int>(i));
  n.outputs.push_back(static_cast<int>(in.size()));
  std::vector<DType> dtypes;
  std::vector<const Tensor*> consts;
  for (size_t i = 0; i < in.size(); ++i) {
    dtypes.push_back(in[i].dtype());
    consts.push_back(i == 0 ? nullptr : &in[i]);
  }
  auto kernel = CreateKernel(n, 13, Backend::kCpu, dtypes, consts);
  if (!kernel.ok()) {
    state.SkipWithError(kernel.status().message().c_str());
    return;
  }
  Tensor y(int8 ? DType::kUInt8 : DType::kFloat32, conv ? Dims{batch, cout, hw, hw} : Dims{batch, N});
  KernelContext ctx;
  for (const Tensor& t : in) ctx.inputs.push_back(&t);
  ctx.outputs.push_back(&y);
  ctx.num_threads = threads;
  for (auto _ : state) {
    Status st = (*kernel)->Compute(ctx);
    if (!st.ok()) {
      state.SkipWithError(st.message().c_str());
      return;
    }
    benchmark::ClobberMemory();
  }
  static const char* kNames[] = {"cnn-conv1", "cnn-conv2", "cnn-fc1", "mlp-fc1"};
  state.SetLabel(std::string(kNames[layer]) + (int8 ? " int8" : " fp32"));
}

BENCHMARK(BM_QLayer)->ArgNames({"int8", "layer", "thr"})->ArgsProduct({{1, 0}, {0, 1, 2, 3}, {1, 2}})->UseRealTime();

}  // namespace
}  // namespace whittle
