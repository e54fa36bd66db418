// Host-side helpers of the CUDA backend (kernels/cuda/ only: this header includes the CUDA
// runtime and cuBLAS headers, which no core or public header may). Work is queued on the calling
// thread's default stream (cudaStreamPerThread), so concurrent Session::Run calls on different
// threads do not serialize on one stream; a device-to-host copy waits for that stream.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <functional>
#include <memory>
#include <string>

#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/layout.h"
#include "kernels/cuda/window.h"
#include "kernels/kernel.h"
#include "lib/ir/status.h"

namespace whittle::cuda {

inline void* Stream() { return static_cast<void*>(cudaStreamPerThread); }

inline Status Check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::Ok();
  return Internal(std::string("CUDA error in ") + what + ": " + cudaGetErrorString(e));
}
Status Check(cublasStatus_t e, const char* what);

// Whether this thread is capturing a CUDA graph (DeviceRuntime::begin_capture): its launches
// are recorded, not run.
bool Capturing();
// Spoils this thread's capture, if one is under way, naming what could not be recorded (state a
// kernel keeps per thread, a copy to the host...), and returns that as an error for the caller
// to pass up; end_capture reports it.
Status RefuseCapture(const std::string& what);

// Keeps b alive as long as the graph being captured on this thread, if any: a buffer a kernel
// cached (a table per shape) and may evict while a graph still reads it.
void HoldForCapture(const std::shared_ptr<Buffer>& b);

// This thread's cuBLAS handle, bound to Stream() (created on first use).
StatusOr<cublasHandle_t> Cublas();

// Row-major C[b][M,N] = alpha op(A[b]) op(B[b]) + beta C[b] for b < batch, float32 tensors;
// lda/ldb/ldc row strides as stored, stride_* the distance between batch entries (0: shared).
// precision: the arithmetic cuBLAS may use (kernels/kernel.h's Precision).
struct GemmCall {
  bool ta = false, tb = false;
  int64_t M = 0, N = 0, K = 0;
  float alpha = 1.f, beta = 0.f;
  const float* A = nullptr;
  int64_t lda = 0, stride_a = 0;
  const float* B = nullptr;
  int64_t ldb = 0, stride_b = 0;
  float* C = nullptr;
  int64_t ldc = 0, stride_c = 0;
  int64_t batch = 1;
  Precision precision = Precision::kFp32;
};
Status RowMajorGemm(const GemmCall& g);

// Whether the registered kCuda DeviceRuntime is this backend's (a test may have put a stand-in
// there; the CUDA kernels are then not built and nodes fall back to the CPU).
bool RuntimeActive();

// --- what every family's host code shares (kernels/cuda/*.cc) ---------------------------------

using MakeFn = std::function<KernelOr(const KernelInit&)>;

// A kernel whose Compute touches device memory only, but for the inputs in host_inputs (bit k:
// input k), which it reads on the host (OpKernel::HostInputs).
template <class Fn>
class CudaKernel : public OpKernel {
 public:
  explicit CudaKernel(Fn fn, uint64_t host_inputs) : fn_(std::move(fn)), host_inputs_(host_inputs) {}
  DeviceType device() const override { return DeviceType::kCuda; }
  uint64_t HostInputs() const override { return host_inputs_; }
  Status Compute(KernelContext& ctx) const override { return fn_(ctx); }

 private:
  Fn fn_;
  uint64_t host_inputs_;
};
template <class Fn>
KernelOr Kernel(Fn fn, uint64_t host_inputs = 0) {
  return std::unique_ptr<OpKernel>(new CudaKernel<Fn>(std::move(fn), host_inputs));
}

// A CudaKernel that reports on the device what it finds wrong (OpKernel::ChecksOnDevice);
// `error` turns its report into the CPU kernel's error.
template <class Fn>
class CheckingCudaKernel : public CudaKernel<Fn> {
 public:
  CheckingCudaKernel(Fn fn, std::function<Status(const int64_t*)> error)
      : CudaKernel<Fn>(std::move(fn), 0), error_(std::move(error)) {}
  bool ChecksOnDevice() const override { return true; }
  Status DeviceCheckError(const int64_t* report) const override { return error_(report); }

 private:
  std::function<Status(const int64_t*)> error_;
};
template <class Fn>
KernelOr CheckingKernel(Fn fn, std::function<Status(const int64_t*)> error) {
  return std::unique_ptr<OpKernel>(new CheckingCudaKernel<Fn>(std::move(fn), std::move(error)));
}

// The launch error of the kernels just queued, if any.
inline Status Launched(const char* what) { return Check(cudaGetLastError(), what); }

// The fused activation when it is one the CUDA kernels apply (Relu, or none), and no other
// runtime-internal attribute (a fused pool, say) except those in `also` asks for more.
bool FusedKind(const AttributeMap& a, Unary* act, std::initializer_list<const char*> also = {});

// Input i's value when it is a constant (null otherwise, or past the inputs), and its dtype
// (kUndefined when absent).
inline const Tensor* ConstInput(const KernelInit& init, int i) {
  return i >= 0 && static_cast<size_t>(i) < init.const_inputs.size() ? init.const_inputs[static_cast<size_t>(i)]
                                                                      : nullptr;
}
inline DType InputDType(const KernelInit& init, int i) {
  return i >= 0 && static_cast<size_t>(i) < init.input_dtypes.size() ? init.input_dtypes[static_cast<size_t>(i)]
                                                                      : DType::kUndefined;
}
// Every present input among `ids` is a constant.
inline bool ConstantInputs(const KernelInit& init, std::initializer_list<int> ids) {
  for (int i : ids)
    if (InputDType(init, i) != DType::kUndefined && !ConstInput(init, i)) return false;
  return true;
}

// Declares `make` as (domain, op)'s Backend::kCuda kernel (input 0 of `dtypes`): with this
// backend's runtime registered, a kernel `make` builds is the node's; a null one (dtypes or
// attributes it does not handle) leaves the node to the reference declaration, which the session
// replaces by the CPU kernel with explicit copies. A node with a fused activation the kernels'
// epilogues lack (all but Relu) is built without it, the activation then applied in place by the
// element-wise kernel.
void DeclareCudaKernel(KernelRegistry& r, const char* domain, const char* op, std::vector<DType> dtypes, MakeFn make);

// `bytes` of host memory in a new device buffer (constants: weights, parameters; at load).
StatusOr<std::shared_ptr<Buffer>> Upload(const void* host, size_t bytes);

// `bytes` of host memory copied into this thread's Scratch(bytes, slot) (per-call parameters a
// kernel checked on the host: no allocation, so no cudaFree stall when the call ends).
StatusOr<void*> UploadToScratch(const void* host, size_t bytes, int slot);

// A per-thread device scratch of at least `bytes` (grown, never shared between threads; work on
// one thread's stream is ordered, so successive kernels may reuse it). `slot` keeps kernels that
// need theirs alive at once apart.
StatusOr<void*> Scratch(size_t bytes, int slot = 0);

// The window of a 2-D Conv/pool node from its attributes, the kernel size and the in/out dims
// (the runtime's shape inference already decided the output size, ceil_mode included).
Window2d WindowOf(const AttributeMap& at, int64_t k_h, int64_t k_w, const Tensor& x, const Tensor& y);
// How a 2-D window op over N images walks its columns [Kg, P] per image: a 1x1 window at stride
// 1 without padding in one group reads (or writes) the images themselves (direct, no scratch);
// otherwise `chunk` images' columns at a time (about 256 MB) in this thread's scratch `col`.
struct ColumnPlan {
  bool direct = false;
  int64_t chunk = 1;
  float* col = nullptr;
};

StatusOr<ColumnPlan> PlanColumns(const Window2d& w, int64_t group, int64_t images, int64_t Kg, int64_t P);
// Whether attribute `key` is absent or has n values (the 2-D kernels' pads, strides, dilations).
bool TwoD(const AttributeMap& at, const char* key, size_t n);
// No input among `ids` has a statically known rank other than 4 (the 2-D convolutions and pools
// decline a 1-D or 3-D node at load, which then runs on the CPU, instead of failing at run time).
inline bool NotKnownOtherThan4d(const KernelInit& init, std::initializer_list<size_t> ids) {
  for (size_t i : ids)
    if (init.InputRank(i) >= 0 && init.InputRank(i) != 4) return false;
  return true;
}
// What every float 2-D window kernel needs (the Conv and pool gradients, ConvTranspose): float32
// inputs, 2-D window attributes, and no input among `ranked` statically known to be other than 4-D.
inline bool FloatWindow2d(const KernelInit& init, std::initializer_list<size_t> ranked) {
  return init.AllFloat32() && TwoD(init.attrs, "pads", 4) && TwoD(init.attrs, "strides", 2) &&
         TwoD(init.attrs, "dilations", 2) && TwoD(init.attrs, "kernel_shape", 2) && NotKnownOtherThan4d(init, ranked);
}

// The family declarations (each file's own ops), called by RegisterKernels (declare.cc).
void RegisterElementwiseKernels(KernelRegistry& r);  // elementwise.cc
void RegisterSoftmaxKernels(KernelRegistry& r);      // softmax.cc
void RegisterNormKernels(KernelRegistry& r);         // norm.cc
void RegisterAttentionKernels(KernelRegistry& r);    // attention.cc
void RegisterLinearKernels(KernelRegistry& r);       // linear.cc
void RegisterConvKernels(KernelRegistry& r);         // conv.cc
void RegisterPoolKernels(KernelRegistry& r);         // pool.cc
void RegisterReduceKernels(KernelRegistry& r);       // reduce.cc
void RegisterQLinearKernels(KernelRegistry& r);
void RegisterBinaryCodebookKernels(KernelRegistry& r);
void RegisterCirculantFftKernels(KernelRegistry& r);
void RegisterMovementKernels(KernelRegistry& r);  // movement.cc
void RegisterResizeKernels(KernelRegistry& r);    // resize.cc
void RegisterRecurrentKernels(KernelRegistry& r);  // recurrent.cc

}  // namespace whittle::cuda
