// The CUDA com.microsoft MatMulNBits launcher (device code: kernels/cuda/nbits.cu; NBitsArgs and
// the bodies: kernels/cuda/nbits_body.h), used by kernels/cuda/nbits.cc. Device pointers in the
// args and a stream as void*, no CUDA types.
#pragma once

namespace whittle {
class KernelRegistry;
}

namespace whittle::cuda {

// Y = A W^T (+ bias) with W decoded from the 4-bit codes as it is read: a warp per output column
// for up to kNBitsGemvMaxRows rows of A (decoding), 64 x 64 tiles beyond.
struct NBitsArgs;
void LaunchMatMulNBits(const NBitsArgs& g, void* stream);

// Declares (com.microsoft, MatMulNBits, float32) on the CUDA backend (kernels/cuda/nbits.cc);
// called by RegisterKernels (declare.cc).
void RegisterNBitsKernels(KernelRegistry& r);

}  // namespace whittle::cuda
