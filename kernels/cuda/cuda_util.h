// Host-side helpers of the CUDA backend (kernels/cuda/ only: this header includes the CUDA
// runtime and cuBLAS headers, which no core or public header may). Work is queued on the calling
// thread's default stream (cudaStreamPerThread), so concurrent Session::Run calls on different
// threads do not serialize on one stream; a device-to-host copy waits for that stream.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <string>

#include "lib/ir/status.h"

namespace whittle::cuda {

inline void* Stream() { return static_cast<void*>(cudaStreamPerThread); }

inline Status Check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::Ok();
  return Internal(std::string("CUDA error in ") + what + ": " + cudaGetErrorString(e));
}
Status Check(cublasStatus_t e, const char* what);

// This thread's cuBLAS handle, bound to Stream() (created on first use).
StatusOr<cublasHandle_t> Cublas();

// Row-major C[M,N] = alpha op(A) op(B) + beta C; lda/ldb/ldc row strides as stored.
Status RowMajorSgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                     const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

// Whether the registered kCuda DeviceRuntime is this backend's (a test may have put a stand-in
// there; the CUDA kernels are then not built and nodes fall back to the CPU).
bool RuntimeActive();

}  // namespace whittle::cuda
