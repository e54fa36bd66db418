// The CUDA backend's LayerNormalization and InstanceNormalization (float32): a block per
// normalised row (LaunchLayerNorm); and inference-form BatchNormalization (LaunchBatchNorm, a
// thread per element; a training graph feeds it the batch statistics).
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/common/norm_shape.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/movement.h"
#include "kernels/cuda/norm.h"
#include "kernels/kernel.h"

namespace whittle::cuda {
namespace {

// LayerNormalization (opset 17), float32, Y only (training graphs that ask for Mean and
// InvStdDev keep the CPU kernel); Scale and B must have the normalised dims' element count.
KernelOr MakeLayerNorm(const KernelInit& init) {
  if (!init.AllFloat32() || init.num_outputs != 1 || init.input_dtypes.size() < 2 ||
      init.attrs.GetInt("stash_type", 1) != 1)
    return KernelOr(nullptr);
  const int64_t axis_attr = init.attrs.GetInt("axis", -1);
  const float eps = init.attrs.GetFloat("epsilon", 1e-5f);
  return Kernel([axis_attr, eps](KernelContext& ctx) -> Status {
    const Tensor& x = *ctx.inputs[0];
    const Tensor& scale = *ctx.inputs[1];
    const Tensor* bias = ctx.inputs.size() > 2 ? ctx.inputs[2] : nullptr;
    const int64_t axis = axis_attr < 0 ? axis_attr + x.rank() : axis_attr;
    if (axis < 0 || axis >= std::max<int64_t>(1, x.rank()))
      return InvalidArgument("LayerNormalization: axis " + std::to_string(axis_attr) + " is out of range");
    int64_t cols = 1;
    const Dims norm(x.dims().begin() + axis, x.dims().end());
    for (int64_t v : norm) cols *= v;
    // Scale and B broadcast to the normalised shape (unidirectionally, numpy-aligned): one that is
    // smaller is expanded into scratch first (a strided copy), so the kernel reads cols of each.
    const float* affine[2] = {scale.data<float>(), bias ? bias->data<float>() : nullptr};
    const Tensor* given[2] = {&scale, bias};
    for (int k = 0; k < 2; ++k) {
      const Tensor* t = given[k];
      if (!t || t->numel() == cols) continue;
      const bool single = t->numel() == 1;
      if ((!single && t->rank() > static_cast<int>(norm.size())) || norm.size() > static_cast<size_t>(kMaxRank))
        return InvalidArgument(std::string("LayerNormalization: ") + (k ? "B" : "Scale") + " does not broadcast to the normalised shape");
      for (int d = 1; !single && d <= t->rank(); ++d) {
        const int64_t td = t->dim(t->rank() - d), nd = norm[norm.size() - static_cast<size_t>(d)];
        if (td != 1 && td != nd)
          return InvalidArgument(std::string("LayerNormalization: ") + (k ? "B" : "Scale") + " does not broadcast to the normalised shape");
      }
      BroadcastShape b;
      b.rank = static_cast<int>(norm.size());
      for (int d = 0; d < b.rank; ++d) b.dims[d] = norm[static_cast<size_t>(d)];
      if (!single) BroadcastStrides(t->dims(), norm, b.a_strides);  // else all 0
      WH_ASSIGN_OR_RETURN(void* full, Scratch(static_cast<size_t>(cols) * sizeof(float), 1 + k));
      LaunchStridedCopy(t->data<float>(), static_cast<float*>(full), b, cols, Stream());
      affine[k] = static_cast<const float*>(full);
    }
    LaunchLayerNorm(x.data<float>(), affine[0], affine[1], ctx.outputs[0]->data<float>(), cols ? x.numel() / cols : 0,
                    cols, eps, Stream());
    return Launched("LayerNormalization");
  });
}

// InstanceNormalization of x [N, C, spatial...]: the LayerNorm kernel over the N*C planes, the
// scale and bias per plane's channel.
KernelOr MakeInstanceNorm(const KernelInit& init) {
  if (!init.AllFloat32() || init.input_dtypes.size() != 3 || init.num_outputs != 1) return KernelOr(nullptr);
  const float eps = init.attrs.GetFloat("epsilon", 1e-5f);
  return Kernel([eps](KernelContext& ctx) -> Status {
    const Tensor& x = *ctx.inputs[0];
    if (x.rank() < 3) return InvalidArgument("InstanceNormalization: X must be [N, C, spatial...], got " + DimsToString(x.dims()));
    const int64_t C = x.dim(1), planes = x.dim(0) * C;
    if (ctx.inputs[1]->numel() != C || ctx.inputs[2]->numel() != C)
      return InvalidArgument("InstanceNormalization: scale and B must have C = " + std::to_string(C) + " values");
    if (planes == 0) return Status::Ok();
    LaunchLayerNorm(x.data<float>(), ctx.inputs[1]->data<float>(), ctx.inputs[2]->data<float>(),
                    ctx.outputs[0]->data<float>(), planes, x.numel() / planes, eps, Stream(), C);
    return Launched("InstanceNormalization");
  });
}

KernelOr MakeBatchNorm(const KernelInit& init) {
  if (!init.AllFloat32() || init.input_dtypes.size() != 5 || init.num_outputs != 1) return KernelOr(nullptr);
  // Inference form only: the shared parser decides training per opset (opset 6's is_test=0
  // default trains; spatial=0 of opsets < 9 has per-element statistics).
  WH_ASSIGN_OR_RETURN(const BatchNormAttrs a, ParseBatchNormAttrs(init));
  if (a.training || !a.spatial) return KernelOr(nullptr);
  const float eps = a.epsilon;
  return Kernel([eps](KernelContext& ctx) -> Status {
    const Tensor& x = *ctx.inputs[0];
    if (x.rank() < 2) return InvalidArgument("BatchNormalization needs [N, C, ...]");
    const int64_t n = x.dim(0), c = x.dim(1), inner = x.numel() / std::max<int64_t>(1, n * c);
    for (int i = 1; i < 5; ++i)
      if (ctx.inputs[static_cast<size_t>(i)]->numel() != c)
        return InvalidArgument("BatchNormalization: input " + std::to_string(i) + " needs C values");
    LaunchBatchNorm(x.data<float>(), ctx.inputs[1]->data<float>(), ctx.inputs[2]->data<float>(),
                    ctx.inputs[3]->data<float>(), ctx.inputs[4]->data<float>(), eps, n, c, inner,
                    ctx.outputs[0]->data<float>(), Stream());
    return Launched("BatchNormalization");
  });
}

}  // namespace

void RegisterNormKernels(KernelRegistry& r) {
  DeclareCudaKernel(r, "", "LayerNormalization", {DType::kFloat32}, MakeLayerNorm);
  DeclareCudaKernel(r, "", "InstanceNormalization", {DType::kFloat32}, MakeInstanceNorm);
  DeclareCudaKernel(r, "", "BatchNormalization", {DType::kFloat32}, MakeBatchNorm);
}

}  // namespace whittle::cuda
