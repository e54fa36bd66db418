// The CUDA backend's reductions (float32): ReduceSum and ReduceMean (the training graph's bias
// gradients and batch statistics), ReduceMax and ReduceMin, over any axes of up to kMaxRank dims,
// the axes from the attribute or an input read on the host (LaunchReduce, kernels/cuda/reduce.h).
#include <string>
#include <vector>

#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/grad_body.h"
#include "kernels/cuda/movement.h"
#include "kernels/cuda/reduce.h"
#include "kernels/kernel.h"

namespace whittle::cuda {
namespace {

// ReduceSum/ReduceMean (op kReduceAdd, mean), ReduceMax/ReduceMin. The axes come from the
// attribute or, from opset 13/18 on, an input read on the host (HostInputs).
MakeFn ReduceOp(int op, bool mean) {
  return [op, mean](const KernelInit& init) -> KernelOr {
    if (InputDType(init, 0) != DType::kFloat32 || init.num_outputs != 1) return KernelOr(nullptr);
    const std::vector<int64_t> axes_attr = init.attrs.GetInts("axes", {});
    const bool axes_input = InputDType(init, 1) != DType::kUndefined;
    if (axes_input && InputDType(init, 1) != DType::kInt64) return KernelOr(nullptr);
    const bool noop_empty = init.attrs.GetInt("noop_with_empty_axes", 0) != 0;
    return Kernel([op, mean, axes_attr, axes_input, noop_empty](KernelContext& ctx) -> Status {
      const Tensor& x = *ctx.inputs[0];
      std::vector<int64_t> axes = axes_attr;
      if (axes_input && ctx.inputs.size() > 1 && ctx.inputs[1])
        axes.assign(ctx.inputs[1]->data<int64_t>(), ctx.inputs[1]->data<int64_t>() + ctx.inputs[1]->numel());
      if (axes.empty() && noop_empty) {  // the identity
        LaunchStridedCopy(x.data<float>(), ctx.outputs[0]->data<float>(), IdentityCopy(x.numel()), x.numel(), Stream());
        return Launched("a reduction");
      }
      const int rank = x.rank();
      if (rank > kMaxRank) return Unimplemented("CUDA reductions take up to 8 dims");
      std::vector<bool> reduced(static_cast<size_t>(rank), axes.empty());
      for (int64_t a : axes) {
        const int64_t d = a < 0 ? a + rank : a;
        if (d < 0 || d >= rank) return InvalidArgument("reduction axis " + std::to_string(a) + " is out of range");
        reduced[static_cast<size_t>(d)] = true;
      }
      ReduceShape r;
      int64_t stride = 1;
      std::vector<int64_t> strides(static_cast<size_t>(rank));
      for (int d = rank - 1; d >= 0; --d) {
        strides[static_cast<size_t>(d)] = stride;
        stride *= x.dim(d);
      }
      for (int d = 0; d < rank; ++d) {
        const bool red = reduced[static_cast<size_t>(d)];
        int64_t* dims = red ? r.reduced_dims : r.kept_dims;
        int64_t* str = red ? r.reduced_strides : r.kept_strides;
        int& n = red ? r.reduced_rank : r.kept_rank;
        dims[n] = x.dim(d);
        str[n] = strides[static_cast<size_t>(d)];
        ++n;
        (red ? r.count : r.outputs) *= x.dim(d);
      }
      if (ctx.outputs[0]->numel() != r.outputs) return Internal("reduction: the output size differs");
      if (r.count == 0) return Unimplemented("a reduction over no elements");
      r.op = op;
      r.scale = mean ? 1.f / static_cast<float>(r.count) : 1.f;
      LaunchReduce(x.data<float>(), ctx.outputs[0]->data<float>(), r, Stream());
      return Launched("a reduction");
    }, axes_input ? 0b10 : 0);
  };
}

}  // namespace

void RegisterReduceKernels(KernelRegistry& r) {
  DeclareCudaKernel(r, "", "ReduceSum", {DType::kFloat32}, ReduceOp(kReduceAdd, false));
  DeclareCudaKernel(r, "", "ReduceMean", {DType::kFloat32}, ReduceOp(kReduceAdd, true));
  DeclareCudaKernel(r, "", "ReduceMax", {DType::kFloat32}, ReduceOp(kReduceMax, false));
  DeclareCudaKernel(r, "", "ReduceMin", {DType::kFloat32}, ReduceOp(kReduceMin, false));
}

}  // namespace whittle::cuda
