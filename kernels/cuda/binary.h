// The CUDA binarized and weight-shared (codebook) layers' launchers (kernels/cuda/binary.cu; the
// BLaunches interface and the phases it runs: kernels/cuda/binary_body.h), used by
// kernels/cuda/binary.cc.
#pragma once

namespace whittle::cuda {

// The binarized and codebook layers' launches on the calling thread's stream (kernels/cuda/
// binary_body.h, binary.cu): one stateless instance, no allocation per call.
struct BLaunches;
BLaunches& CudaBLaunches();

}  // namespace whittle::cuda
