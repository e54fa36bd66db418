#include "kernels/reference/nbits.h"

#include <memory>

namespace whittle {

Status MatMulNBitsReference(const NBitsAttrs& a, const NBitsWeights& w, const Tensor& A, Tensor* y) {
  if (A.dtype() != DType::kFloat32 || A.rank() < 1 || A.dim(A.rank() - 1) != a.K)
    return InvalidArgument("MatMulNBits: A must be float32 [..., " + std::to_string(a.K) + "], got " +
                           DimsToString(A.dims()));
  const int64_t M = A.numel() / a.K;
  const float* pa = A.data<float>();
  float* py = y->data<float>();
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < a.N; ++n) {
      float acc = 0.f;
      for (int64_t k = 0; k < a.K; ++k) {
        const int64_t j = k / a.block;
        const float wv = (static_cast<float>(w.Code(a, n, k)) - w.ZeroPoint(a, n, j)) * w.scales[n * a.blocks() + j];
        acc += pa[m * a.K + k] * wv;
      }
      py[m * a.N + n] = acc + (w.bias ? w.bias[n] : 0.f);
    }
  return Status::Ok();
}

namespace reference {
namespace {

KernelOr MakeReference(const NBitsAttrs& a, const KernelInit&) {
  return WrapFnKernel([a](KernelContext& ctx) -> Status {
    auto in = [&](size_t i) { return ctx.inputs.size() > i ? ctx.inputs[i] : nullptr; };
    WH_ASSIGN_OR_RETURN(NBitsWeights w, CheckNBitsOperands(a, *ctx.inputs[1], *ctx.inputs[2], in(3), in(4), in(5)));
    return MatMulNBitsReference(a, w, *ctx.inputs[0], ctx.outputs[0]);
  });
}

}  // namespace

const NBitsFns kNBitsFns{MakeReference};

}  // namespace reference
}  // namespace whittle
