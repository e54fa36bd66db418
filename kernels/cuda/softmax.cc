// The CUDA backend's Softmax and LogSoftmax (float32, over the last axis; before opset 13 over
// the flattened dims from axis on): a warp per row (kernels/cuda/softmax_body.h).
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/softmax.h"
#include "kernels/kernel.h"

namespace whittle::cuda {
namespace {

// --- Softmax ------------------------------------------------------------------------------

MakeFn SoftmaxOp(bool log) {
  return [log](const KernelInit& init) -> KernelOr {
    if (!init.AllFloat32()) return KernelOr(nullptr);
    const int64_t axis = init.attrs.GetInt("axis", init.opset < 13 ? 1 : -1);
    if (init.opset >= 13 && axis != -1) return KernelOr(nullptr);  // only the last axis, unflattened
    const int opset = init.opset;
    return Kernel([log, axis, opset](KernelContext& ctx) -> Status {
      const Tensor& x = *ctx.inputs[0];
      int64_t cols = x.rank() ? x.dims().back() : 1;
      if (opset < 13) {  // softmax over the flattened dims from axis on
        const int64_t ax = axis < 0 ? axis + x.rank() : axis;
        cols = 1;
        for (int d = static_cast<int>(ax); d < x.rank(); ++d) cols *= x.dim(d);
      }
      if (cols == 0) return Status::Ok();
      LaunchSoftmax(x.data<float>(), ctx.outputs[0]->data<float>(), x.numel() / cols, cols, log, Stream());
      return Launched("Softmax");
    });
  };
}

}  // namespace

void RegisterSoftmaxKernels(KernelRegistry& r) {
  DeclareCudaKernel(r, "", "Softmax", {DType::kFloat32}, SoftmaxOp(false));
  DeclareCudaKernel(r, "", "LogSoftmax", {DType::kFloat32}, SoftmaxOp(true));
}

}  // namespace whittle::cuda
