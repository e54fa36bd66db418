// The CUDA block-circulant layer's launchers (kernels/cuda/circulant.cu; the CLaunches interface
// and the bodies: kernels/cuda/circulant_body.h), used by kernels/cuda/circulant.cc: the pad,
// bin-product and epilogue kernels and the cuFFT transforms.
#pragma once

namespace whittle::cuda {

// The block-circulant layer's launches and cuFFT transforms (kernels/cuda/circulant_body.h, .cu).
struct CLaunches;
CLaunches& CudaCLaunches();

}  // namespace whittle::cuda
