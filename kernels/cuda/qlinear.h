// The CUDA int8 GEMM family's launchers (kernels/cuda/qlinear.cu; the QLaunches interface and
// the phases it runs: kernels/cuda/qgemm_body.h), used by QLinearMatMul, QGemm and the integer
// convolutions (kernels/cuda/qlinear.cc), and the cuBLAS int8 product they may take instead.
#pragma once

#include <cstdint>

namespace whittle::cuda {

// The int8 GEMM's launches on the calling thread's stream (cudaStreamPerThread; kernels/cuda/
// qgemm_body.h, kernels/cuda/qlinear.cu): one stateless instance, no allocation per call.
struct QLaunches;
QLaunches& CudaQLaunches();

// c [M][N] int32 = a8 [M][Kp] x bt [N][Kp]^T (int8, int32 accumulation) by cuBLAS on the calling
// thread's stream (runtime.cc); false when cuBLAS cannot run it (the caller uses its own kernel).
bool Int8GemmTN(const int8_t* bt, const int8_t* a8, int32_t* c, int64_t M, int64_t N, int64_t Kp);

}  // namespace whittle::cuda
