#include "kernels/reference/circulant.h"

#include <string>
#include <vector>

namespace whittle {

Status BlockCirculantMatMulReference(const CirculantAttrs& a, const Tensor& x, const Tensor& blocks, const Tensor* bias,
                                     Tensor* y) {
  if (x.rank() < 1 || x.dims().back() != a.k)
    return InvalidArgument("BlockCirculantMatMul: A " + DimsToString(x.dims()) + " must end in in_features " +
                           std::to_string(a.k));
  const int64_t M = x.numel() / a.k, B = a.block, Q = a.q();
  const float* A = x.data<float>();
  const float* c = blocks.data<float>();
  float* Y = y->data<float>();
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < a.n; ++n) {
      const int64_t p = n / B, i = n % B;
      double s = 0;
      for (int64_t k = 0; k < a.k; ++k) {
        const int64_t q = k / B, j = k % B;
        s += static_cast<double>(A[m * a.k + k]) * c[(p * Q + q) * B + (i - j + B) % B];
      }
      Y[m * a.n + n] = static_cast<float>(s + (bias ? bias->data<float>()[n] : 0.f));
    }
  return Status::Ok();
}

void BlockCirculantGradWeightReference(const CirculantAttrs& a, const Tensor& dy, const Tensor& x, Tensor* dblocks) {
  const int64_t M = x.numel() / a.k, B = a.block, Q = a.q();
  const float* A = x.data<float>();
  const float* G = dy.data<float>();
  std::vector<double> acc(static_cast<size_t>(a.p() * Q * B), 0.0);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < a.n; ++n)
      for (int64_t k = 0; k < a.k; ++k)
        acc[static_cast<size_t>(((n / B) * Q + k / B) * B + (n % B - k % B + B) % B)] +=
            static_cast<double>(G[m * a.n + n]) * A[m * a.k + k];
  float* out = dblocks->data<float>();
  for (size_t i = 0; i < acc.size(); ++i) out[i] = static_cast<float>(acc[i]);
}

namespace reference {
namespace {
KernelOr Make(const CirculantAttrs& a, const KernelInit&) {
  return WrapFnKernel([a](KernelContext& ctx) {
    return BlockCirculantMatMulReference(a, *ctx.inputs[0], *ctx.inputs[1], ctx.inputs.size() > 2 ? ctx.inputs[2] : nullptr,
                                         ctx.outputs[0]);
  });
}
KernelOr MakeGradWeight(const CirculantAttrs& a, const KernelInit&) {
  return WrapFnKernel([a](KernelContext& ctx) {
    WH_RETURN_IF_ERROR(CheckCirculantGradWeightShapes(a, *ctx.inputs[0], *ctx.inputs[1]));
    BlockCirculantGradWeightReference(a, *ctx.inputs[0], *ctx.inputs[1], ctx.outputs[0]);
    return Status::Ok();
  });
}
}  // namespace
const CirculantFns kCirculantFns{Make, MakeGradWeight};
}  // namespace reference

}  // namespace whittle
