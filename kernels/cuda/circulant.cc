// The CUDA block-circulant layer's host side: ai.whittle BlockCirculantMatMul whose blocks and
// bias are constants (as compress-model writes them) takes the cuFFT path of
// kernels/cuda/circulant_body.h: the blocks' spectra are computed once at load and uploaded, and
// each call runs pad, FFT, bin products, inverse FFT and the epilogue on the device, rows in
// chunks of about 128 MB of scratch. Attributes or tensors the CPU factory would refuse, and
// computed blocks (a training graph), are left to the CPU.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/circulant.h"
#include "kernels/cuda/circulant_body.h"
#include "kernels/cuda/cuda_util.h"
#include "lib/ir/circulant_format.h"

namespace whittle::cuda {
namespace {

KernelOr MakeBlockCirculantMatMul(const KernelInit& init) {
  Unary act;
  const CirculantAttrs a = CirculantAttrsOf(init.attrs);
  const Tensor* blocks = ConstInput(init, 1);
  const Tensor* bias = ConstInput(init, 2);
  if (InputDType(init, 0) != DType::kFloat32 || !blocks || !ConstantInputs(init, {2}) ||
      !FusedKind(init.attrs, &act) || !CheckCirculantAttrs(a).ok() || !CheckCirculantTensors(a, *blocks, bias).ok())
    return KernelOr(nullptr);
  const CircShape shape = CircShapeOf(a);
  const std::vector<float> spectra = CirculantSpectra(blocks->data<float>(), shape.P, shape.Q, shape.B);
  WH_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> cf, Upload(spectra.data(), spectra.size() * sizeof(float)));
  std::shared_ptr<Buffer> b;
  if (bias) {
    WH_ASSIGN_OR_RETURN(b, Upload(bias->raw_data(), bias->nbytes()));
  }
  const bool relu = act == Unary::kRelu;
  const std::string node = init.node_name;
  return Kernel([=](KernelContext& ctx) -> Status {
    const Tensor& x = *ctx.inputs[0];
    Tensor& y = *ctx.outputs[0];
    if (x.rank() < 1 || x.dims().back() != shape.K)
      return InvalidArgument(node + ": the input's last dim must be " + std::to_string(shape.K) + ", got " +
                             DimsToString(x.dims()));
    const int64_t rows = x.numel() / shape.K;
    if (y.numel() != rows * shape.N)
      return InvalidArgument(node + ": output has the wrong size " + DimsToString(y.dims()));
    if (rows == 0) return Status::Ok();
    // cuFFT's plans, and their work areas, are this thread's (circulant.cu's PlanFor): a graph
    // replayed on another thread, or after this one ended, would use them from there.
    if (Capturing()) return RefuseCapture(node + ": cuFFT plans are kept per thread");
    const int64_t per_row = CircScratchPerRow(shape);
    const int64_t chunk = std::max<int64_t>(1, std::min(rows, (int64_t{32} << 20) / per_row));
    WH_ASSIGN_OR_RETURN(void* scratch, Scratch(static_cast<size_t>(CircScratchFloats(shape, chunk)) * sizeof(float), 1));
    const float* bias_d = b ? static_cast<const float*>(b->data()) : nullptr;
    if (!RunCirculant(CudaCLaunches(), shape, static_cast<const float*>(cf->data()), bias_d, relu, x.data<float>(),
                      rows, chunk, y.data<float>(), static_cast<float*>(scratch)))
      return Internal(node + ": cuFFT could not plan or run a batched FFT of length " + std::to_string(shape.B));
    return Launched("BlockCirculantMatMul");
  });
}

}  // namespace

void RegisterCirculantFftKernels(KernelRegistry& r) {
  DeclareCudaKernel(r, kWhittleDomain, "BlockCirculantMatMul", {DType::kFloat32}, MakeBlockCirculantMatMul);
}

}  // namespace whittle::cuda
