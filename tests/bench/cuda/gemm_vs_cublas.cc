// GEMM on the GPU as a fraction of cuBLAS's own figure for the shape. Whittle's CUDA kernels,
// called as the runtime calls them (KernelContext over device tensors), against cuBLAS called
// directly on the same device buffers:
//   fp32: the MatMul kernel (constant B; cublasGemmEx inside, plus its dispatch) vs cublasSgemm;
//   int8: the QLinearMatMul kernel (own dp4a tile kernel, split over K when it has few tiles,
//         requantizing epilogue to uint8) vs cublasGemmEx int8 x int8 -> int32 in cuBLAS's
//         preferred layout (A row-major, B as [N, K]; CUBLAS_COMPUTE_32I, tensor cores), which
//         does less (no zero points, no requantization).
// Device time only (no host copies): CUDA events around 20 launches after 5 warm-up launches,
// the median of 7 such repeats. Prints a Markdown table; exits non-zero on any CUDA error.
//
//   build/bin/whittle_cuda_gemm_bench [M,K,N ...]
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/kernel.h"
#include "lib/ir/device.h"
#include "lib/ir/graph.h"
#include "lib/ir/tensor.h"
#include "runtime/node_runner.h"

namespace {

using namespace whittle;

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "whittle_cuda_gemm_bench: %s\n", what.c_str());
  std::exit(1);
}
void Cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) Fail(std::string(what) + ": " + cudaGetErrorString(e));
}

Tensor OnDevice(const Tensor& host) {
  auto t = host.ToDevice(DeviceType::kCuda);
  if (!t.ok()) Fail("upload: " + t.status().message());
  return *t;
}

template <class T>
Tensor Random(DType dt, Dims dims, int lo, int hi, uint32_t seed) {
  Tensor t(dt, dims);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<T>()[i] = static_cast<T>(d(rng));
  return t;
}

// Milliseconds per call of f: the median over 7 repeats of 20 launches (after 5 warm-up ones).
double MedianMs(const std::function<void()>& f) {
  cudaEvent_t a, b;
  Cuda(cudaEventCreate(&a), "cudaEventCreate");
  Cuda(cudaEventCreate(&b), "cudaEventCreate");
  for (int i = 0; i < 5; ++i) f();
  std::vector<double> ms;
  for (int r = 0; r < 7; ++r) {
    Cuda(cudaEventRecord(a, cudaStreamPerThread), "cudaEventRecord");
    for (int i = 0; i < 20; ++i) f();
    Cuda(cudaEventRecord(b, cudaStreamPerThread), "cudaEventRecord");
    Cuda(cudaEventSynchronize(b), "cudaEventSynchronize");
    float t = 0;
    Cuda(cudaEventElapsedTime(&t, a, b), "cudaEventElapsedTime");
    ms.push_back(t / 20.0);
  }
  Cuda(cudaGetLastError(), "a launch");
  std::sort(ms.begin(), ms.end());
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms[ms.size() / 2];
}

std::unique_ptr<OpKernel> Kernel(const Node& n, const std::vector<DType>& dts, const std::vector<const Tensor*>& consts) {
  auto k = CreateKernel(n, 13, Backend::kCuda, dts, consts, Precision::kFp32);
  if (!k.ok()) Fail(k.status().message());
  if ((*k)->device() != DeviceType::kCuda) Fail(n.op_type + ": no CUDA kernel for this shape (it would run on the CPU)");
  return std::move(*k);
}

void Run(const OpKernel& k, std::vector<const Tensor*> in, Tensor* out) {
  KernelContext ctx;
  ctx.inputs = std::move(in);
  ctx.outputs = {out};
  const Status st = k.Compute(ctx);
  if (!st.ok()) Fail(st.message());
}

}  // namespace

int main(int argc, char** argv) {
  RegisterAllKernels();
  std::string why;
  if (!DeviceAvailable(DeviceType::kCuda, &why)) Fail("no CUDA device: " + why);
  std::vector<std::array<int64_t, 3>> shapes = {{64, 784, 256},    {1024, 784, 256},  {64, 1568, 128},
                                                {1024, 1568, 128}, {4096, 4096, 4096}, {8192, 1024, 1024}};
  if (argc > 1) shapes.clear();
  for (int i = 1; i < argc; ++i) {
    long long m, k, n;
    if (std::sscanf(argv[i], "%lld,%lld,%lld", &m, &k, &n) != 3 || m < 1 || k < 1 || n < 1)
      Fail(std::string("a shape is M,K,N (positive), got '") + argv[i] + "'");
    shapes.push_back({m, k, n});
  }
  cudaDeviceProp prop{};
  Cuda(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) Fail("cublasCreate");
  cublasSetStream(h, cudaStreamPerThread);
  std::printf("GPU: %s. Device time per GEMM (median of 7 x 20 launches); fraction = cuBLAS time / Whittle time\n\n",
              prop.name);
  std::printf("| M | K | N | fp32 Whittle ms | cublasSgemm ms | fraction | fp32 TFLOP/s | int8 Whittle ms | cuBLAS int8 ms | fraction | int8 TOP/s |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const auto& [M, K, N] : shapes) {
    const double ops = 2.0 * static_cast<double>(M) * static_cast<double>(K) * static_cast<double>(N);
    // fp32
    Node mm;
    mm.name = "bench_matmul";
    mm.op_type = "MatMul";
    mm.inputs = {0, 1};
    mm.outputs = {2};
    const Tensor a_h = Random<float>(DType::kFloat32, {M, K}, -3, 3, 1), b_h = Random<float>(DType::kFloat32, {K, N}, -3, 3, 2);
    auto fk = Kernel(mm, {DType::kFloat32, DType::kFloat32}, {nullptr, &b_h});
    const Tensor a = OnDevice(a_h), b = OnDevice(b_h);
    Tensor y = OnDevice(Tensor(DType::kFloat32, {M, N}));
    const double w32 = MedianMs([&] { Run(*fk, {&a, &b}, &y); });
    const float one = 1.f, zero = 0.f;
    const double c32 = MedianMs([&] {
      cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(N), static_cast<int>(M), static_cast<int>(K), &one,
                  b.data<float>(), static_cast<int>(N), a.data<float>(), static_cast<int>(K), &zero, y.data<float>(),
                  static_cast<int>(N));
    });
    // int8: QLinearMatMul(a uint8, per-tensor; b int8 symmetric, per-column scales) -> uint8
    Node q;
    q.name = "bench_qlinearmatmul";
    q.op_type = "QLinearMatMul";
    q.inputs = {0, 1, 2, 3, 4, 5, 6, 7};
    q.outputs = {8};
    const Tensor qa_h = Random<uint8_t>(DType::kUInt8, {M, K}, 0, 255, 3), qb_h = Random<int8_t>(DType::kInt8, {K, N}, -127, 127, 4);
    const Tensor a_scale = Tensor::Scalar<float>(0.02f), a_zp = Tensor::Scalar<uint8_t>(128);
    Tensor b_scale(DType::kFloat32, {N});
    for (int64_t i = 0; i < N; ++i) b_scale.data<float>()[i] = 0.001f * static_cast<float>(1 + i % 7);
    const Tensor b_zp = Tensor::Scalar<int8_t>(0), y_scale = Tensor::Scalar<float>(0.5f), y_zp = Tensor::Scalar<uint8_t>(128);
    const std::vector<const Tensor*> qc = {nullptr, &a_scale, &a_zp, &qb_h, &b_scale, &b_zp, &y_scale, &y_zp};
    auto qk = Kernel(q, {DType::kUInt8, DType::kFloat32, DType::kUInt8, DType::kInt8, DType::kFloat32, DType::kInt8,
                         DType::kFloat32, DType::kUInt8}, qc);
    const Tensor qa = OnDevice(qa_h);
    Tensor qy = OnDevice(Tensor(DType::kUInt8, {M, N}));
    std::vector<const Tensor*> qin = qc;
    qin[0] = &qa;
    const double w8 = MedianMs([&] { Run(*qk, qin, &qy); });
    // cuBLAS int8: B as [N, K] (transposed once here), C int32.
    Tensor bt_h(DType::kInt8, {N, K});
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n) bt_h.data<int8_t>()[n * K + k] = qb_h.data<int8_t>()[k * N + n];
    const Tensor bt = OnDevice(bt_h), sa = OnDevice(Random<int8_t>(DType::kInt8, {M, K}, -127, 127, 5));
    Tensor c = OnDevice(Tensor(DType::kInt32, {M, N}));
    const int32_t ione = 1, izero = 0;
    const cublasStatus_t probe =
        cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(N), static_cast<int>(M), static_cast<int>(K), &ione,
                     bt.raw_data(), CUDA_R_8I, static_cast<int>(K), sa.raw_data(), CUDA_R_8I, static_cast<int>(K), &izero,
                     c.raw_data(), CUDA_R_32I, static_cast<int>(N), CUBLAS_COMPUTE_32I, CUBLAS_GEMM_DEFAULT);
    double c8 = -1;
    if (probe == CUBLAS_STATUS_SUCCESS)
      c8 = MedianMs([&] {
        cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(N), static_cast<int>(M), static_cast<int>(K), &ione,
                     bt.raw_data(), CUDA_R_8I, static_cast<int>(K), sa.raw_data(), CUDA_R_8I, static_cast<int>(K), &izero,
                     c.raw_data(), CUDA_R_32I, static_cast<int>(N), CUBLAS_COMPUTE_32I, CUBLAS_GEMM_DEFAULT);
      });
    char c8s[64] = "n/a", f8s[64] = "n/a";
    if (c8 > 0) {
      std::snprintf(c8s, sizeof c8s, "%.4f", c8);
      std::snprintf(f8s, sizeof f8s, "%.2f", c8 / w8);
    } else {
      std::snprintf(c8s, sizeof c8s, "n/a (status %d)", static_cast<int>(probe));
    }
    std::printf("| %lld | %lld | %lld | %.4f | %.4f | %.2f | %.1f | %.4f | %s | %s | %.1f |\n",
                static_cast<long long>(M), static_cast<long long>(K), static_cast<long long>(N), w32, c32, c32 / w32,
                ops / w32 * 1e-9, w8, c8s, f8s, ops / w8 * 1e-9);
    std::fflush(stdout);
  }
  cublasDestroy(h);
  return 0;
}
