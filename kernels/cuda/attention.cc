// The CUDA backend's ai.whittle Attention (float32): per head, strided-batched cuBLAS products
// around a masked softmax, reading Q, K and V in place from the packed QKV rows.
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/common/attention_shape.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/softmax.h"
#include "kernels/cuda/softmax_body.h"
#include "kernels/kernel.h"
#include "lib/ir/domain.h"

namespace whittle::cuda {
namespace {

// ai.whittle Attention (runtime/rewrite/fuse_attention.h; lib/ops/attention.cc): per head, over
// a chunk of the batch at a time, S = scale Q K^T and Y_h = softmax(S) V as strided-batched cuBLAS
// products reading Q, K and V in place from the packed QKV rows and writing Y in place, the
// softmax a warp per row between them. The scale input (the exporter's 1/sqrt(d), computed at run
// time from the shape) is read by the softmax on the device, so nothing waits for it; so is the
// additive mask, broadcast over [B, H, N, N] by strides (kernels/cuda/softmax_body.h).
KernelOr MakeAttention(const KernelInit& init) {
  const int64_t h = init.attrs.GetInt("heads", 0), d = init.attrs.GetInt("head_dim", 0);
  if (InputDType(init, 0) != DType::kFloat32 || h < 1 || d < 1 ||
      (InputDType(init, 2) != DType::kUndefined && InputDType(init, 2) != DType::kFloat32))
    return KernelOr(nullptr);
  if (InputDType(init, 1) != DType::kUndefined && InputDType(init, 1) != DType::kFloat32) return KernelOr(nullptr);
  const float scale = init.attrs.GetFloat("scale", 1.f);
  const Precision precision = init.precision;
  return Kernel([h, d, scale, precision](KernelContext& ctx) -> Status {
    const Tensor& x = *ctx.inputs[0];
    Tensor& y = *ctx.outputs[0];
    WH_RETURN_IF_ERROR(CheckAttentionQkv(x, y, h, d));
    const Tensor* scale_in = ctx.inputs.size() > 1 ? ctx.inputs[1] : nullptr;
    if (scale_in) WH_RETURN_IF_ERROR(CheckAttentionScale(*scale_in));
    const int64_t B = x.dim(0), N = x.dim(1), ld_in = 3 * h * d, ld_out = h * d;
    const Tensor* mask_t = ctx.inputs.size() > 2 ? ctx.inputs[2] : nullptr;
    int64_t ms[4] = {0, 0, 0, 0};  // the mask's strides over [B, H, N, N]
    if (mask_t) WH_RETURN_IF_ERROR(AttentionMaskStrides(*mask_t, B, h, N, ms));
    if (B == 0 || N == 0) return Status::Ok();
    // The scores of up to `chunk` batch entries at a time (about 256 MB).
    const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(B, (int64_t{64} << 20) / (N * N)));
    WH_ASSIGN_OR_RETURN(void* sp, Scratch(static_cast<size_t>(chunk * N * N) * sizeof(float)));
    float* scores = static_cast<float*>(sp);
    for (int64_t b0 = 0; b0 < B; b0 += chunk) {
      const int64_t nb = std::min(chunk, B - b0);
      for (int64_t hi = 0; hi < h; ++hi) {
        const float* q = x.data<float>() + b0 * N * ld_in + hi * d;
        GemmCall qk;  // S[b] = scale Q_b K_b^T
        qk.tb = true;
        qk.M = N;
        qk.N = N;
        qk.K = d;
        qk.alpha = scale;
        qk.A = q;
        qk.lda = ld_in;
        qk.stride_a = N * ld_in;
        qk.B = q + h * d;
        qk.ldb = ld_in;
        qk.stride_b = N * ld_in;
        qk.C = scores;
        qk.ldc = N;
        qk.stride_c = N * N;
        qk.batch = nb;
        qk.precision = precision;
        WH_RETURN_IF_ERROR(RowMajorGemm(qk));
        SoftmaxMask mask;  // rows of the chunk: nb groups (batch entries) of N query rows
        if (mask_t) mask = {mask_t->data<float>() + b0 * ms[0] + hi * ms[1], N, ms[0], ms[2], ms[3]};
        LaunchSoftmax(scores, scores, nb * N, N, false, Stream(), scale_in ? scale_in->data<float>() : nullptr,
                      mask_t ? &mask : nullptr);
        GemmCall pv;  // Y_h[b] = P[b] V_b
        pv.M = N;
        pv.N = d;
        pv.K = N;
        pv.A = scores;
        pv.lda = N;
        pv.stride_a = N * N;
        pv.B = q + 2 * h * d;
        pv.ldb = ld_in;
        pv.stride_b = N * ld_in;
        pv.C = y.data<float>() + b0 * N * ld_out + hi * d;
        pv.ldc = ld_out;
        pv.stride_c = N * ld_out;
        pv.batch = nb;
        pv.precision = precision;
        WH_RETURN_IF_ERROR(RowMajorGemm(pv));
      }
    }
    return Launched("Attention");
  });
}

}  // namespace

void RegisterAttentionKernels(KernelRegistry& r) {
  DeclareCudaKernel(r, kWhittleDomain, "Attention", {DType::kFloat32}, MakeAttention);
}

}  // namespace whittle::cuda
