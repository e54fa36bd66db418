// The one place that lists every kernel family. Each declares its ops' kernels per backend
// (KernelDef: the reference's, the CPU's where its BackendTable row has the builder). The CUDA
// backend declares its own when its module is loaded, on demand (kernels/backend_module.h).
#include <mutex>

#include "kernels/kernel.h"

namespace whittle {

void RegisterElementwiseKernels(KernelRegistry& r);  // kernels/elementwise_kernels.cc
void RegisterReduceKernels(KernelRegistry& r);
void RegisterConvKernels(KernelRegistry& r);
void RegisterLinearKernels(KernelRegistry& r);
void RegisterNormKernels(KernelRegistry& r);
void RegisterPoolKernels(KernelRegistry& r);
void RegisterShapeKernels(KernelRegistry& r);
void RegisterMovementKernels(KernelRegistry& r);
void RegisterQuantKernels(KernelRegistry& r);
void RegisterQLinearKernels(KernelRegistry& r);  // kernels/qlinear_kernels.cc
void RegisterIndexKernels(KernelRegistry& r);
void RegisterLossKernels(KernelRegistry& r);
void RegisterRecurrentKernels(KernelRegistry& r);  // kernels/recurrent_kernels.cc
void RegisterResampleKernels(KernelRegistry& r);  // kernels/resample_kernels.cc
void RegisterNchwcKernels(KernelRegistry& r);     // kernels/nchwc_kernels.cc
void RegisterAttentionKernels(KernelRegistry& r);  // kernels/attention_kernels.cc
void RegisterOnnxAttentionKernels(KernelRegistry& r);  // kernels/onnx_attention_kernels.cc
void RegisterGradKernels(KernelRegistry& r);       // kernels/grad_kernels.cc
void RegisterCodebookKernels(KernelRegistry& r);   // kernels/codebook_kernels.cc
void RegisterBinaryKernels(KernelRegistry& r);     // kernels/binary_kernels.cc
void RegisterCirculantKernels(KernelRegistry& r);  // kernels/circulant_kernels.cc
void RegisterSignalKernels(KernelRegistry& r);     // kernels/signal_kernels.cc
void RegisterNBitsKernels(KernelRegistry& r);      // kernels/nbits_kernels.cc
void RegisterControlFlowKernels(KernelRegistry& r);  // kernels/control_flow_kernels.cc
void RegisterSequenceKernels(KernelRegistry& r);     // kernels/sequence_kernels.cc

void RegisterAllKernels() {
  static std::once_flag once;
  std::call_once(once, [] {
    KernelRegistry& r = KernelRegistry::Global();
    RegisterElementwiseKernels(r);
    RegisterReduceKernels(r);
    RegisterConvKernels(r);
    RegisterLinearKernels(r);
    RegisterNormKernels(r);
    RegisterPoolKernels(r);
    RegisterShapeKernels(r);
    RegisterMovementKernels(r);
    RegisterQuantKernels(r);
    RegisterQLinearKernels(r);
    RegisterIndexKernels(r);
    RegisterLossKernels(r);
    RegisterRecurrentKernels(r);
    RegisterResampleKernels(r);
    RegisterNchwcKernels(r);
    RegisterAttentionKernels(r);
    RegisterOnnxAttentionKernels(r);
    RegisterGradKernels(r);
    RegisterCodebookKernels(r);
    RegisterBinaryKernels(r);
    RegisterCirculantKernels(r);
    RegisterSignalKernels(r);
    RegisterNBitsKernels(r);
    RegisterControlFlowKernels(r);
    RegisterSequenceKernels(r);
  });
}

}  // namespace whittle
