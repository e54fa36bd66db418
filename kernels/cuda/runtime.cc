// The CUDA DeviceRuntime (lib/ir/device.h): cudaMalloc'd, zero-filled buffers, copies on the
// calling thread's stream, and the per-thread cuBLAS handle.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "kernels/cuda/cuda_util.h"
#include "lib/ir/device.h"

namespace whittle::cuda {
namespace {

bool Available(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    if (why) *why = std::string("no CUDA device (") + (e != cudaSuccess ? cudaGetErrorString(e) : "none found") + ")";
    cudaGetLastError();  // clear the sticky error of the failed query
    return false;
  }
  return true;
}

void* Allocate(size_t bytes) {
  void* p = nullptr;
  if (cudaMalloc(&p, bytes) != cudaSuccess) return nullptr;
  if (cudaMemsetAsync(p, 0, bytes, cudaStreamPerThread) != cudaSuccess) {
    cudaFree(p);
    return nullptr;
  }
  return p;
}

void Release(void* p) { cudaFree(p); }  // synchronizes the device, so no kernel still reads p

Status Copy(void* dst, DeviceType dd, const void* src, DeviceType sd, size_t bytes) {
  const cudaMemcpyKind kind = dd == DeviceType::kCuda ? (sd == DeviceType::kCuda ? cudaMemcpyDeviceToDevice
                                                                                : cudaMemcpyHostToDevice)
                                                      : cudaMemcpyDeviceToHost;
  WH_RETURN_IF_ERROR(Check(cudaMemcpyAsync(dst, src, bytes, kind, cudaStreamPerThread), "cudaMemcpyAsync"));
  // Host memory here is pageable: wait, so the host may read (or free) it after the return.
  return Check(cudaStreamSynchronize(cudaStreamPerThread), "cudaStreamSynchronize");
}

Status Synchronize() { return Check(cudaStreamSynchronize(cudaStreamPerThread), "cudaStreamSynchronize"); }

const DeviceRuntime kRuntime = [] {
  DeviceRuntime rt;
  rt.available = Available;
  rt.allocate = Allocate;
  rt.release = Release;
  rt.copy = Copy;
  rt.synchronize = Synchronize;
  return rt;
}();

}  // namespace

Status Check(cublasStatus_t e, const char* what) {
  if (e == CUBLAS_STATUS_SUCCESS) return Status::Ok();
  return Internal(std::string("cuBLAS error in ") + what + ": status " + std::to_string(static_cast<int>(e)));
}

StatusOr<cublasHandle_t> Cublas() {
  struct Handle {
    cublasHandle_t h = nullptr;
    cublasStatus_t st = CUBLAS_STATUS_NOT_INITIALIZED;
    Handle() {
      st = cublasCreate(&h);
      if (st == CUBLAS_STATUS_SUCCESS) st = cublasSetStream(h, cudaStreamPerThread);
    }
    ~Handle() {
      if (h) cublasDestroy(h);
    }
  };
  thread_local Handle handle;
  WH_RETURN_IF_ERROR(Check(handle.st, "cublasCreate"));
  return handle.h;
}

Status RowMajorSgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                     const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  WH_ASSIGN_OR_RETURN(cublasHandle_t h, Cublas());
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands.
  return Check(cublasSgemm(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(N),
                           static_cast<int>(M), static_cast<int>(K), &alpha, B, static_cast<int>(ldb), A,
                           static_cast<int>(lda), &beta, C, static_cast<int>(ldc)),
               "cublasSgemm");
}

StatusOr<std::shared_ptr<Buffer>> Upload(const void* host, size_t bytes) {
  WH_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> b, Buffer::AllocateOn(DeviceType::kCuda, std::max<size_t>(bytes, 1)));
  if (bytes) WH_RETURN_IF_ERROR(Copy(b->data(), DeviceType::kCuda, host, DeviceType::kCpu, bytes));
  return b;
}

StatusOr<void*> Scratch(size_t bytes, int slot) {
  constexpr int kSlots = 4;
  thread_local std::shared_ptr<Buffer> buffers[kSlots];
  if (slot < 0 || slot >= kSlots) return Internal("CUDA scratch slot out of range");
  std::shared_ptr<Buffer>& b = buffers[slot];
  if (!b || b->size() < bytes) {
    b.reset();  // cudaFree waits for the device, so nothing queued still reads the old one
    WH_ASSIGN_OR_RETURN(b, Buffer::AllocateOn(DeviceType::kCuda, std::max<size_t>(bytes, 256)));
  }
  return b->data();
}

bool RuntimeActive() { return DeviceRuntimeFor(DeviceType::kCuda) == &kRuntime; }

void RegisterRuntime() { RegisterDeviceRuntime(DeviceType::kCuda, &kRuntime); }

}  // namespace whittle::cuda
