// The CUDA reduction family's launcher (device code: kernels/cuda/reduce.cu; ReduceShape and
// ReduceShareAt: kernels/cuda/grad_body.h): ReduceSum, ReduceMean, ReduceMax and ReduceMin of
// float32. Device pointers and a stream as void*, no CUDA types (kernels/cuda/elementwise.h says
// how every launcher behaves).
#pragma once

namespace whittle::cuda {

// y[o] = scale * the sum of x over the reduced axes (ReduceSum, ReduceMean); grad_body.h's ReduceShape.
struct ReduceShape;
void LaunchReduce(const float* x, float* y, const ReduceShape& r, void* stream);

}  // namespace whittle::cuda
