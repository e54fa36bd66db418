// CUDA LSTM and GRU (float32, both layouts, one or two directions, sequence_lens, peepholes,
// clip, input_forget, linear_before_reset; default activations): RunRecurrent's sequence
// (kernels/cuda/recurrent_driver.h) on cuBLAS and the cell kernel. Other attributes decline to the
// CPU kernels. sequence_lens is read on the host and checked there as on the CPU (a length outside
// [0, seq] is the CPU's error), then uploaded.
#include <cuda_runtime_api.h>

#include "kernels/common/recurrent_attrs.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/recurrent.h"
#include "kernels/cuda/recurrent_driver.h"

namespace whittle::cuda {
namespace {

class CudaRecurrentOps : public RecurrentOps {
 public:
  explicit CudaRecurrentOps(Precision p) : precision_(p) {}
  Status Gemm(const float* a, int64_t lda, const float* bt, int64_t ldb, float* c, int64_t ldc, int64_t M, int64_t N,
              int64_t K) override {
    GemmCall g;
    g.tb = true;
    g.M = M, g.N = N, g.K = K;
    g.A = a, g.lda = lda, g.B = bt, g.ldb = ldb, g.C = c, g.ldc = ldc;
    g.precision = precision_;
    return RowMajorGemm(g);
  }
  Status Zero(float* p, int64_t n) override {
    return Check(cudaMemsetAsync(p, 0, static_cast<size_t>(n) * sizeof(float), cudaStreamPerThread), "cudaMemsetAsync");
  }
  Status Copy2d(const float* src, int64_t src_stride, float* dst, int64_t rows, int64_t cols) override {
    if (rows == 0 || cols == 0) return Status::Ok();
    return Check(cudaMemcpy2DAsync(dst, static_cast<size_t>(cols) * sizeof(float), src,
                                   static_cast<size_t>(src_stride) * sizeof(float), static_cast<size_t>(cols) * sizeof(float),
                                   static_cast<size_t>(rows), cudaMemcpyDeviceToDevice, cudaStreamPerThread),
                 "cudaMemcpy2DAsync");
  }
  Status Cell(const RecurrentStep& s) override {
    LaunchRecurrentCell(s, Stream());
    return Status::Ok();
  }

 private:
  Precision precision_;
};

MakeFn RecurrentOp_(RecurrentOp op) {
  return [op](const KernelInit& init) -> KernelOr {
    if (InputDType(init, 0) != DType::kFloat32) return KernelOr(nullptr);
    auto parsed = ParseRecurrentAttrs(op, init);
    if (!parsed.ok() || !CudaRecurrentSupports(*parsed)) return KernelOr(nullptr);
    const RecurrentAttrs a = *parsed;
    const Precision precision = init.precision;
    return Kernel([a, precision](KernelContext& ctx) -> Status {
      RecurrentDims d;
      WH_RETURN_IF_ERROR(d.Resolve(a, ctx.inputs));
      auto in = [&ctx](int i) -> const Tensor* {
        return i < static_cast<int>(ctx.inputs.size()) ? ctx.inputs[static_cast<size_t>(i)] : nullptr;
      };
      auto out = [&ctx](int i) -> Tensor* {
        return i < static_cast<int>(ctx.outputs.size()) ? ctx.outputs[static_cast<size_t>(i)] : nullptr;
      };
      auto f = [](const Tensor* t) { return t ? t->data<float>() : nullptr; };
      auto fo = [](Tensor* t) { return t ? t->data<float>() : nullptr; };
      // sequence_lens is read on the host (HostInputs) and checked as on the CPU, then uploaded.
      const int32_t* lens_dev = nullptr;
      if (in(kRnnSeqLens)) {
        WH_ASSIGN_OR_RETURN(std::vector<int64_t> lens, ResolveSequenceLengths(in(kRnnSeqLens), d));
        std::vector<int32_t> l32(lens.begin(), lens.end());
        WH_ASSIGN_OR_RETURN(void* p, UploadToScratch(l32.data(), l32.size() * sizeof(int32_t), 2));
        lens_dev = static_cast<const int32_t*>(p);
      }
      RecurrentCall call;
      call.X = f(in(kRnnX)), call.W = f(in(kRnnW)), call.R = f(in(kRnnR)), call.B = f(in(kRnnB));
      call.h0 = f(in(kRnnInitialH));
      call.lens = lens_dev;
      const bool lstm = a.op == RecurrentOp::kLstm;
      if (lstm) call.c0 = f(in(kRnnInitialC)), call.P = f(in(kRnnP));
      call.Y = fo(out(0)), call.Yh = fo(out(1)), call.Yc = lstm ? fo(out(2)) : nullptr;
      WH_ASSIGN_OR_RETURN(void* scratch, Scratch(static_cast<size_t>(RecurrentScratchFloats(d)) * sizeof(float)));
      call.scratch = static_cast<float*>(scratch);
      CudaRecurrentOps ops(precision);
      WH_RETURN_IF_ERROR(RunRecurrent(a, d, call, ops));
      return Launched(lstm ? "LSTM" : "GRU");
    }, uint64_t{1} << kRnnSeqLens);
  };
}

}  // namespace

void RegisterRecurrentKernels(KernelRegistry& r) {
  DeclareCudaKernel(r, "", "LSTM", {DType::kFloat32}, RecurrentOp_(RecurrentOp::kLstm));
  DeclareCudaKernel(r, "", "GRU", {DType::kFloat32}, RecurrentOp_(RecurrentOp::kGru));
}

}  // namespace whittle::cuda
