// The CUDA DeviceRuntime (lib/ir/device.h): cudaMalloc'd, zero-filled buffers, copies on the
// calling thread's stream, and the per-thread cuBLAS handle.
#include <algorithm>
#include <climits>
#include <cstring>
#include <memory>
#include <string>

#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/movement.h"
#include "kernels/cuda/qlinear.h"
#include "kernels/param_update.h"
#include "lib/ir/device.h"

namespace whittle::cuda {
namespace {

constexpr int kScratchSlots = 4;
// cuBLAS's workspace while capturing (NVIDIA's figure for Hopper; 4 MiB serves older parts):
// the graph's own, so a replay never reads a workspace a thread's handle freed or reused.
constexpr size_t kCaptureWorkspaceBytes = size_t{32} << 20;
// The most a captured host-to-device copy may carry (in the launches' parameters, LaunchWriteBytes):
// shape values and per-call tables; larger host data is no fixed part of a graph.
constexpr size_t kMaxCapturedUploadBytes = 4096;

// What a capture on this thread owns: the scratch its kernels asked for (each size it grew to:
// an early kernel's launch still points at the smaller one) and cuBLAS's workspace.
struct CaptureState {
  std::shared_ptr<Buffer> scratch[kScratchSlots];
  std::vector<std::shared_ptr<Buffer>> owned;
  Status refused = Status::Ok();  // the first thing that could not be captured
};
thread_local CaptureState* capturing = nullptr;

struct CapturedGraph {
  cudaGraphExec_t exec = nullptr;
  std::unique_ptr<CaptureState> state;
};

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

// Page-locked host memory (DeviceRuntime::allocate_host): the copy engine reads it directly, where
// pageable memory is first staged by the driver through a buffer of its own.
void* AllocateHost(size_t bytes) {
  void* p = nullptr;
  if (cudaHostAlloc(&p, bytes, cudaHostAllocDefault) != cudaSuccess) {
    cudaGetLastError();  // a refused allocation is not the next kernel's error
    return nullptr;
  }
  std::memset(p, 0, bytes);
  return p;
}

void ReleaseHost(void* p) { cudaFreeHost(p); }  // waits for the copies that still read p

Status Copy(void* dst, DeviceType dd, const void* src, DeviceType sd, size_t bytes) {
  if (capturing) {  // no synchronisation, and only what replays the same every time
    if (dd == DeviceType::kCuda && sd == DeviceType::kCuda)
      return Check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cudaStreamPerThread), "cudaMemcpyAsync");
    if (dd == DeviceType::kCuda && bytes <= kMaxCapturedUploadBytes) {
      LaunchWriteBytes(dst, src, static_cast<int64_t>(bytes), Stream());
      return Launched("a captured upload");
    }
    return RefuseCapture(dd == DeviceType::kCuda ? "an upload of more than 4 KiB" : "a copy to the host");
  }
  const cudaMemcpyKind kind = dd == DeviceType::kCuda ? (sd == DeviceType::kCuda ? cudaMemcpyDeviceToDevice
                                                                                : cudaMemcpyHostToDevice)
                                                      : cudaMemcpyDeviceToHost;
  WH_RETURN_IF_ERROR(Check(cudaMemcpyAsync(dst, src, bytes, kind, cudaStreamPerThread), "cudaMemcpyAsync"));
  // Host memory here is pageable: wait, so the host may read (or free) it after the return.
  return Check(cudaStreamSynchronize(cudaStreamPerThread), "cudaStreamSynchronize");
}

// Queued without a wait (DeviceRuntime::copy_async). From pageable host memory cudaMemcpyAsync
// returns once the driver has staged the bytes, so src is free again. From page-locked memory it
// returns before the copy is made: that is the point of such memory when the caller holds src
// until it synchronizes (src_held: a session's caller-fed input), and otherwise the copy waits.
// A device-to-device copy never needs a wait for the host's sake.
Status CopyAsync(void* dst, const void* src, DeviceType sd, size_t bytes, bool src_held) {
  if (capturing) return Copy(dst, DeviceType::kCuda, src, sd, bytes);
  if (sd == DeviceType::kCpu) {
    cudaPointerAttributes attr{};
    const cudaError_t e = cudaPointerGetAttributes(&attr, src);
    if (e != cudaSuccess) cudaGetLastError();  // an unregistered pointer is not an error to keep
    const bool pageable = e == cudaSuccess && attr.type == cudaMemoryTypeUnregistered;
    const bool page_locked = e == cudaSuccess && attr.type == cudaMemoryTypeHost;
    if (!pageable && !(page_locked && src_held)) return Copy(dst, DeviceType::kCuda, src, sd, bytes);
  }
  return Check(cudaMemcpyAsync(dst, src, bytes, sd == DeviceType::kCuda ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice,
                               cudaStreamPerThread),
               "cudaMemcpyAsync");
}

// Into page-locked memory (DeviceRuntime::download_async) the copy is queued like a kernel; the
// caller reads dst after it synchronizes.
Status DownloadAsync(void* dst, const void* src, size_t bytes) {
  if (capturing) return RefuseCapture("a copy to the host");
  return Check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, cudaStreamPerThread), "cudaMemcpyAsync");
}

Status Synchronize() {
  if (capturing) return RefuseCapture("a synchronisation");
  return Check(cudaStreamSynchronize(cudaStreamPerThread), "cudaStreamSynchronize");
}

// Relaxed mode: buffers the capture allocates (cudaMalloc, never freed while it lasts) are legal
// then; the work on this thread's stream is recorded.
Status BeginCapture() {
  if (capturing) return Internal("a CUDA graph capture is already under way on this thread");
  auto state = std::make_unique<CaptureState>();
  WH_ASSIGN_OR_RETURN(cublasHandle_t h, Cublas());
  WH_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> ws, Buffer::AllocateOn(DeviceType::kCuda, kCaptureWorkspaceBytes));
  WH_RETURN_IF_ERROR(Check(cublasSetWorkspace(h, ws->data(), kCaptureWorkspaceBytes), "cublasSetWorkspace"));
  state->owned.push_back(std::move(ws));
  if (Status st = Check(cudaStreamBeginCapture(cudaStreamPerThread, cudaStreamCaptureModeRelaxed),
                        "cudaStreamBeginCapture");
      !st.ok()) {
    cublasSetStream(h, cudaStreamPerThread);  // back to the handle's own workspace
    return st;
  }
  capturing = state.release();
  return Status::Ok();
}

Status EndCapture(void** graph) {
  *graph = nullptr;
  if (!capturing) return Internal("no CUDA graph capture is under way on this thread");
  std::unique_ptr<CaptureState> state(capturing);
  capturing = nullptr;
  cudaGraph_t g = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(cudaStreamPerThread, &g);
  if (auto h = Cublas(); h.ok()) cublasSetStream(*h, cudaStreamPerThread);  // resets the workspace too
  Status st = !state->refused.ok() ? state->refused : Check(ended, "cudaStreamEndCapture");
  cudaGraphExec_t exec = nullptr;
  if (st.ok()) st = Check(cudaGraphInstantiate(&exec, g, 0), "cudaGraphInstantiate");
  if (g) cudaGraphDestroy(g);
  if (!st.ok()) {
    cudaGetLastError();  // a spoiled capture's error is not the next kernel's
    return st;
  }
  *graph = new CapturedGraph{exec, std::move(state)};
  return Status::Ok();
}

Status Replay(void* graph) {
  if (capturing) return RefuseCapture("a graph launch");
  return Check(cudaGraphLaunch(static_cast<CapturedGraph*>(graph)->exec, cudaStreamPerThread), "cudaGraphLaunch");
}

// An executable graph still in flight is freed when its work ends (cudaGraphExecDestroy); its
// scratch goes with cudaFree, which waits for the device first.
void DropGraph(void* graph) {
  auto* g = static_cast<CapturedGraph*>(graph);
  if (!g) return;
  cudaGraphExecDestroy(g->exec);
  delete g;
}

const DeviceRuntime kRuntime = [] {
  DeviceRuntime rt;
  rt.available = Available;
  rt.allocate = Allocate;
  rt.release = Release;
  rt.copy = Copy;
  rt.copy_async = CopyAsync;
  rt.download_async = DownloadAsync;
  rt.allocate_host = AllocateHost;
  rt.release_host = ReleaseHost;
  rt.synchronize = Synchronize;
  rt.begin_capture = BeginCapture;
  rt.end_capture = EndCapture;
  rt.replay = Replay;
  rt.drop_graph = DropGraph;
  return rt;
}();

}  // namespace

bool Capturing() { return capturing != nullptr; }

Status RefuseCapture(const std::string& what) {
  Status st = Unimplemented("cannot be captured in a CUDA graph: " + what);
  if (capturing && capturing->refused.ok()) capturing->refused = st;
  return st;
}

void HoldForCapture(const std::shared_ptr<Buffer>& b) {
  if (capturing && b) capturing->owned.push_back(b);
}

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

namespace {
// float32 operands and result throughout; the compute type is where the precision goes.
cublasComputeType_t ComputeType(Precision p) {
  switch (p) {
    case Precision::kTf32: return CUBLAS_COMPUTE_32F_FAST_TF32;
    case Precision::kFp16: return CUBLAS_COMPUTE_32F_FAST_16F;
    case Precision::kBf16: return CUBLAS_COMPUTE_32F_FAST_16BF;
    case Precision::kFp32: break;
  }
  return CUBLAS_COMPUTE_32F;
}
}  // namespace

Status RowMajorGemm(const GemmCall& g) {
  WH_ASSIGN_OR_RETURN(cublasHandle_t h, Cublas());
  const int m = static_cast<int>(g.M), n = static_cast<int>(g.N), k = static_cast<int>(g.K);
  const cublasOperation_t op_a = g.ta ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = g.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  // cuBLAS refuses a leading dimension below 1 even where a dim is 0 (K = 0: C = beta C, nothing
  // read; seen on an H100 with MatMul [8,3,0] x [0,4]).
  const int lda = static_cast<int>(std::max<int64_t>(1, g.lda)), ldb = static_cast<int>(std::max<int64_t>(1, g.ldb)),
            ldc = static_cast<int>(std::max<int64_t>(1, g.ldc));
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands.
  if (g.batch == 1)
    return Check(cublasGemmEx(h, op_b, op_a, n, m, k, &g.alpha, g.B, CUDA_R_32F, ldb, g.A,
                              CUDA_R_32F, lda, &g.beta, g.C, CUDA_R_32F, ldc,
                              ComputeType(g.precision), CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
  return Check(cublasGemmStridedBatchedEx(h, op_b, op_a, n, m, k, &g.alpha, g.B, CUDA_R_32F, ldb,
                                          g.stride_b, g.A, CUDA_R_32F, lda, g.stride_a, &g.beta, g.C,
                                          CUDA_R_32F, ldc, g.stride_c, static_cast<int>(g.batch),
                                          ComputeType(g.precision), CUBLAS_GEMM_DEFAULT),
               "cublasGemmStridedBatchedEx");
}

bool Int8GemmTN(const int8_t* bt, const int8_t* a8, int32_t* c, int64_t M, int64_t N, int64_t Kp) {
  auto h = Cublas();
  if (!h.ok() || M > INT32_MAX || N > INT32_MAX || Kp > INT32_MAX) return false;
  const int32_t one = 1, zero = 0;
  // Row-major C = A B^T is column-major C^T = Bt^T A^T: Bt [N][Kp] read transposed, A8 as is.
  return cublasGemmEx(*h, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(N), static_cast<int>(M), static_cast<int>(Kp),
                      &one, bt, CUDA_R_8I, static_cast<int>(Kp), a8, CUDA_R_8I, static_cast<int>(Kp), &zero, c,
                      CUDA_R_32I, static_cast<int>(N), CUBLAS_COMPUTE_32I, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS;
}

StatusOr<std::shared_ptr<Buffer>> Upload(const void* host, size_t bytes) {
  // A kernel keeps this buffer past the capture; recorded, it would be filled only by a replay.
  if (capturing) return RefuseCapture("a kernel's lasting upload (its cache is filled by an uncaptured run)");
  WH_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> b, Buffer::AllocateOn(DeviceType::kCuda, std::max<size_t>(bytes, 1)));
  if (bytes) WH_RETURN_IF_ERROR(Copy(b->data(), DeviceType::kCuda, host, DeviceType::kCpu, bytes));
  return b;
}

StatusOr<void*> Scratch(size_t bytes, int slot) {
  thread_local std::shared_ptr<Buffer> buffers[kScratchSlots];
  if (slot < 0 || slot >= kScratchSlots) return Internal("CUDA scratch slot out of range");
  // A capture's kernels get the graph's own scratch: a thread's may be freed or regrown before a
  // replay, and a replay may run on another thread beside this one's work.
  std::shared_ptr<Buffer>& b = capturing ? capturing->scratch[slot] : buffers[slot];
  if (!b || b->size() < bytes) {
    if (capturing && b) capturing->owned.push_back(b);  // recorded launches still point at it
    b.reset();  // cudaFree waits for the device, so nothing queued still reads the old one
    WH_ASSIGN_OR_RETURN(b, Buffer::AllocateOn(DeviceType::kCuda, std::max<size_t>(bytes, 256)));
  }
  return b->data();
}

StatusOr<void*> UploadToScratch(const void* host, size_t bytes, int slot) {
  WH_ASSIGN_OR_RETURN(void* p, Scratch(bytes, slot));
  // Stream-ordered: a later upload into the same scratch waits for the kernels queued before it.
  if (bytes) WH_RETURN_IF_ERROR(Copy(p, DeviceType::kCuda, host, DeviceType::kCpu, bytes));
  return p;
}

bool RuntimeActive() { return DeviceRuntimeFor(DeviceType::kCuda) == &kRuntime; }

const ParamUpdates& CudaParamUpdates();  // param_update.cu

void RegisterRuntime() {
  RegisterDeviceRuntime(DeviceType::kCuda, &kRuntime);
  RegisterParamUpdates(DeviceType::kCuda, &CudaParamUpdates());
}

}  // namespace whittle::cuda
