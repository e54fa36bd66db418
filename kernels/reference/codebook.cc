#include "kernels/reference/codebook.h"

namespace whittle {

Status CodebookMatMulReference(const CodebookAttrs& a, const Tensor& x, const Tensor& codebook, const Tensor& indices,
                               const Tensor* bias, Tensor* y) {
  const int64_t M = x.numel() / a.k;
  const float* A = x.data<float>();
  const float* cb = codebook.data<float>();
  const uint8_t* idx = indices.data<uint8_t>();
  float* Y = y->data<float>();
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < a.n; ++n) {
      double s = 0;
      for (int64_t k = 0; k < a.k; ++k) s += static_cast<double>(A[m * a.k + k]) * cb[CodebookIndexAt(idx, n * a.k + k, a.bits)];
      Y[m * a.n + n] = static_cast<float>(s + (bias ? bias->data<float>()[n] : 0.f));
    }
  return Status::Ok();
}

namespace reference {
namespace {
KernelOr Make(const CodebookAttrs& a, const KernelInit&) {
  return WrapFnKernel([a](KernelContext& ctx) {
    return CodebookMatMulReference(a, *ctx.inputs[0], *ctx.inputs[1], *ctx.inputs[2],
                                   ctx.inputs.size() > 3 ? ctx.inputs[3] : nullptr, ctx.outputs[0]);
  });
}
}  // namespace
const CodebookFns kCodebookFns{Make};
}  // namespace reference

}  // namespace whittle
