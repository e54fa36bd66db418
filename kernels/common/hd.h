// WH_HD marks a function that host and device code both compile: kernels/common/elementwise_ops.h's
// element-wise formulas (called by the reference, CPU and CUDA kernels alike) and the CUDA
// backend's kernel bodies (kernels/cuda/hd.h), which g++ also compiles into tests that run them on
// the CPU. No CUDA header here.
#pragma once

#ifdef __CUDACC__
#define WH_HD __host__ __device__ __forceinline__
#define WH_HD_INLINE __host__ __device__ __forceinline__
#else
#define WH_HD inline
// Inlined on the host too: a formula called with a constant op (kernels/cpu/elementwise.cc's
// MapOp) folds to that op's arithmetic and the loop around it vectorises.
#define WH_HD_INLINE inline __attribute__((always_inline))
#endif
