// Binarized GEMM (ai.whittle BinaryMatMul, kernels/cpu/binary.cc) against the project's FP32 GEMMs
// at M=64, N=K=1024 (and batch 1), single-threaded: the packed-weight GEMM (packed_gemm.h, what a
// float Gemm with constant weights runs) and Sgemm (auto policy); the binary-weight kernel
// (activations=float); the XNOR kernel as the op runs it (sign-packing A, XOR + popcount, scaling);
// and the bare XOR + popcount loop on each popcount path this CPU runs. WHITTLE_ISA=avx2 caps the
// packed GEMM, the decoders and the op's popcount path at AVX2.
// Run: whittle_bench --benchmark_filter=Binary --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/binary_gemm.h"
#include "kernels/cpu/packed_gemm.h"
#include "kernels/cpu/sgemm.h"
#include "kernels/kernel.h"
#include "lib/ir/binary_format.h"
#include "lib/ir/domain.h"

namespace whittle {
namespace {

Tensor Random(const Dims& d, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  Tensor t(DType::kFloat32, d);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

// Args: mode, M, N, K. Modes: 0 FP32 packed GEMM, 1 FP32 Sgemm, 2 BinaryMatMul activations=float,
// 3 BinaryMatMul activations=binary, 4 + PopcountPath: the bare XorPopcount of that path, 8 the
// bare AVX2 XorPopcountNibbles, 9 the bare AVX-512 XorPopcountPanels (the layouts the op runs).
void BM_BinaryGemm(benchmark::State& state) {
  const int mode = static_cast<int>(state.range(0));
  const int64_t M = state.range(1), N = state.range(2), K = state.range(3), words = BinaryWords(K);
  const Tensor a = Random({M, K}, 1), w = Random({N, K}, 2);
  Tensor y(DType::kFloat32, {M, N});
  if (mode == 0 || mode == 1) {
    const cpu::PackedGemmB packed(w.data<float>(), true, K, N);
    for (auto _ : state) {
      if (mode == 0) packed.Multiply(M, a.data<float>(), K, y.data<float>(), N, nullptr, false, 1);
      else Sgemm(false, true, M, N, K, 1.f, a.data<float>(), K, w.data<float>(), K, 0.f, y.data<float>(), N, 1);
      benchmark::ClobberMemory();
    }
    state.SetLabel(mode == 0 ? std::string("fp32 packed ") + cpu::SimdIsaName(packed.isa()) : "fp32 sgemm");
    return;
  }
  Tensor bits(DType::kUInt64, {N, words});
  Tensor alpha(DType::kFloat32, {N});
  for (int64_t n = 0; n < N; ++n)
    alpha.data<float>()[n] = static_cast<float>(PackSigns(w.data<float>() + n * K, K, bits.data<uint64_t>() + n * words) / K);
  if (mode >= 4) {
    const auto path = static_cast<cpu::PopcountPath>(mode >= 8 ? mode - 6 : mode - 4);
    if (!cpu::CpuHasPopcountPath(path)) {
      state.SkipWithError("popcount path not on this CPU");
      return;
    }
    std::vector<uint64_t> abits(static_cast<size_t>(M * words));
    for (int64_t m = 0; m < M; ++m) PackSigns(a.data<float>() + m * K, K, abits.data() + m * words);
    std::vector<int32_t> cnt(static_cast<size_t>(M * N));
    const cpu::XorPopcountFn fn = cpu::XorPopcountFor(path);
    const std::vector<uint8_t> nibbles = mode == 8 ? cpu::NibbleColumns(bits.data<uint64_t>(), N, words)
                                                   : std::vector<uint8_t>();
    const std::vector<uint64_t> panels = mode == 9 ? cpu::InterleaveColumns(bits.data<uint64_t>(), N, words)
                                                   : std::vector<uint64_t>();
    for (auto _ : state) {
      if (mode == 8)
        cpu::binary_avx2::XorPopcountNibbles(M, abits.data(), words, nibbles.data(), N, words, cnt.data(), N);
      else if (mode == 9)
        cpu::binary_avx512::XorPopcountPanels(M, abits.data(), words, panels.data(), N, words, cnt.data(), N);
      else
        fn(M, abits.data(), words, bits.data<uint64_t>(), N, words, cnt.data(), N);
      benchmark::ClobberMemory();
    }
    state.SetLabel(std::string(mode == 8 ? "xor+popcount nibble-lut " : mode == 9 ? "xor+popcount panels " : "xor+popcount ") +
                   cpu::PopcountPathName(path));
    return;
  }
  RegisterAllKernels();
  AttributeMap attrs;
  attrs.Set("out_features", Attribute::Int(N));
  attrs.Set("in_features", Attribute::Int(K));
  attrs.Set("activations", Attribute::String(mode == 3 ? "binary" : "float"));
  const KernelInit init{attrs, 1, {DType::kFloat32, DType::kUInt64, DType::kFloat32}, {nullptr, &bits, &alpha}, 1,
                        "bench", Backend::kCpu};
  auto kernel = (*KernelRegistry::Global().Find(kWhittleDomain, "BinaryMatMul"))(init);
  if (!kernel.ok()) {
    state.SkipWithError(kernel.status().message().c_str());
    return;
  }
  KernelContext ctx;
  ctx.inputs = {&a, &bits, &alpha};
  ctx.outputs = {&y};
  ctx.num_threads = 1;
  for (auto _ : state) {
    (void)(*kernel)->Compute(ctx);
    benchmark::ClobberMemory();
  }
  state.SetLabel(mode == 3 ? std::string("BinaryMatMul xnor ") + cpu::PopcountPathName(cpu::ActivePopcountPath())
                           : std::string("BinaryMatMul float-act ") + cpu::SimdIsaName(cpu::ActiveSimdIsa()));
}

void Args(benchmark::internal::Benchmark* b) {
  for (int64_t m : {64, 1})
    for (int mode = 0; mode <= 9; ++mode) b->Args({mode, m, 1024, 1024});
}
BENCHMARK(BM_BinaryGemm)->Apply(Args)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace whittle
