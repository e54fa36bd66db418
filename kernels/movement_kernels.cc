// Kernels for the data-movement ops. Each factory reads the attributes once; Compute reads the
// index inputs (starts, pads, axes ...) of the call, resolves them with the helpers of
// kernels/reference/movement.h and calls the reference or the CPU implementation. Tile and Range
// have no fast path: the CPU provider uses the reference kernels.
#include <algorithm>
#include <string>
#include <vector>

#include "kernels/cpu/movement.h"
#include "kernels/kernel.h"
#include "kernels/reference/movement.h"

namespace whittle {
namespace {

using Factory = StatusOr<std::unique_ptr<OpKernel>>;

// Values of an optional int32/int64 index input; empty when absent.
StatusOr<std::vector<int64_t>> IndexInput(const KernelContext& ctx, size_t i, const char* what) {
  if (i >= ctx.inputs.size() || !ctx.inputs[i]) return std::vector<int64_t>();
  const Tensor& t = *ctx.inputs[i];
  if (t.dtype() != DType::kInt64 && t.dtype() != DType::kInt32)
    return InvalidArgument(std::string(what) + " must be int64, got " + DTypeName(t.dtype()));
  std::vector<int64_t> v(static_cast<size_t>(t.numel()));
  for (size_t k = 0; k < v.size(); ++k)
    v[k] = t.dtype() == DType::kInt64 ? t.data<int64_t>()[k] : t.data<int32_t>()[k];
  return v;
}

Factory MakeTranspose(const KernelInit& init, bool cpu) {
  const std::vector<int64_t> perm_attr = init.attrs.GetInts("perm");
  return WrapFnKernel([perm_attr, cpu](KernelContext& ctx) -> Status {
    const Tensor& in = *ctx.inputs[0];
    WH_ASSIGN_OR_RETURN(std::vector<int64_t> perm, ResolvePerm(perm_attr, in.rank()));
    return cpu ? TransposeCpu(in, perm, ctx.outputs[0], ctx.num_threads) : TransposeReference(in, perm, ctx.outputs[0]);
  });
}

Factory MakeConcat(const KernelInit& init, bool cpu) {
  const int64_t axis_attr = init.attrs.GetInt("axis", 0);
  return WrapFnKernel([axis_attr, cpu](KernelContext& ctx) -> Status {
    std::vector<const Tensor*> ins;
    for (const Tensor* t : ctx.inputs) {
      if (!t) return InvalidArgument("Concat inputs may not be absent");
      if (t->rank() != ctx.outputs[0]->rank() || t->dtype() != ctx.outputs[0]->dtype())
        return InvalidArgument("Concat inputs must share the output's rank and type");
      ins.push_back(t);
    }
    WH_ASSIGN_OR_RETURN(int64_t axis, KernelAxis(axis_attr, ctx.outputs[0]->rank()));
    return cpu ? ConcatCpu(ins, axis, ctx.outputs[0], ctx.num_threads) : ConcatReference(ins, axis, ctx.outputs[0]);
  });
}

Factory MakeSplit(const KernelInit& init, bool cpu) {
  const int64_t axis_attr = init.attrs.GetInt("axis", 0);
  return WrapFnKernel([axis_attr, cpu](KernelContext& ctx) -> Status {
    const Tensor& in = *ctx.inputs[0];
    for (const Tensor* t : ctx.outputs)
      if (!t) return Unimplemented("Split with an absent output is not supported");
    WH_ASSIGN_OR_RETURN(int64_t axis, KernelAxis(axis_attr, in.rank()));
    return cpu ? SplitCpu(in, axis, ctx.outputs, ctx.num_threads) : SplitReference(in, axis, ctx.outputs);
  });
}

Factory MakeSlice(const KernelInit& init, bool cpu) {
  const int opset = init.opset;
  const std::vector<int64_t> starts_attr = init.attrs.GetInts("starts"), ends_attr = init.attrs.GetInts("ends"),
                             axes_attr = init.attrs.GetInts("axes");
  return WrapFnKernel([=](KernelContext& ctx) -> Status {
    const Tensor& in = *ctx.inputs[0];
    std::vector<int64_t> starts = starts_attr, ends = ends_attr, axes = axes_attr, steps;
    if (opset >= 10) {
      WH_ASSIGN_OR_RETURN(starts, IndexInput(ctx, 1, "starts"));
      WH_ASSIGN_OR_RETURN(ends, IndexInput(ctx, 2, "ends"));
      WH_ASSIGN_OR_RETURN(axes, IndexInput(ctx, 3, "axes"));
      WH_ASSIGN_OR_RETURN(steps, IndexInput(ctx, 4, "steps"));
    }
    WH_ASSIGN_OR_RETURN(SliceParams p, ResolveSlice(in.dims(), starts, ends, axes, steps));
    return cpu ? SliceCpu(in, p, ctx.outputs[0], ctx.num_threads) : SliceReference(in, p, ctx.outputs[0]);
  });
}

Factory MakeGather(const KernelInit& init, bool cpu) {
  const int64_t axis_attr = init.attrs.GetInt("axis", 0);
  return WrapFnKernel([axis_attr, cpu](KernelContext& ctx) -> Status {
    const Tensor& data = *ctx.inputs[0];
    const Tensor& indices = *ctx.inputs[1];
    WH_ASSIGN_OR_RETURN(int64_t axis, KernelAxis(axis_attr, data.rank()));
    return cpu ? GatherCpu(data, indices, axis, ctx.outputs[0], ctx.num_threads)
               : GatherReference(data, indices, axis, ctx.outputs[0]);
  });
}

Factory MakeExpand(const KernelInit&, bool cpu) {
  return WrapFnKernel([cpu](KernelContext& ctx) -> Status {
    return cpu ? ExpandCpu(*ctx.inputs[0], ctx.outputs[0], ctx.num_threads)
               : ExpandReference(*ctx.inputs[0], ctx.outputs[0]);
  });
}

Factory MakePad(const KernelInit& init, bool cpu) {
  WH_ASSIGN_OR_RETURN(PadMode mode, ParsePadMode(init.attrs.GetString("mode", "constant")));
  const int opset = init.opset;
  const std::vector<int64_t> pads_attr = init.attrs.GetInts("pads");
  const float value_attr = init.attrs.GetFloat("value", 0.f);
  return WrapFnKernel([=](KernelContext& ctx) -> Status {
    const Tensor& in = *ctx.inputs[0];
    std::vector<int64_t> pads = pads_attr;
    uint64_t bits = 0;
    if (opset >= 11) {
      WH_ASSIGN_OR_RETURN(pads, IndexInput(ctx, 1, "pads"));
      const Tensor* v = ctx.inputs.size() > 2 ? ctx.inputs[2] : nullptr;
      if (v) {
        if (v->dtype() != in.dtype() || v->numel() != 1)
          return InvalidArgument("constant_value must be a scalar of the data's type");
        std::copy_n(static_cast<const char*>(v->raw_data()), DTypeSize(v->dtype()), reinterpret_cast<char*>(&bits));
      }
    } else {
      WH_ASSIGN_OR_RETURN(bits, PadValueBits(value_attr, in.dtype()));
    }
    if (pads.size() != 2 * static_cast<size_t>(in.rank()))
      return InvalidArgument("pads must have 2 * rank = " + std::to_string(2 * in.rank()) + " entries");
    return cpu ? PadCpu(in, pads, mode, bits, ctx.outputs[0], ctx.num_threads)
               : PadReference(in, pads, mode, bits, ctx.outputs[0]);
  });
}

Factory MakeTile(const KernelInit&, bool) {
  return WrapFnKernel([](KernelContext& ctx) -> Status { return TileReference(*ctx.inputs[0], ctx.outputs[0]); });
}

Factory MakeRange(const KernelInit&, bool) {
  return WrapFnKernel(
      [](KernelContext& ctx) -> Status { return RangeReference(*ctx.inputs[0], *ctx.inputs[2], ctx.outputs[0]); });
}

void RegisterOp(KernelRegistry& r, const std::string& op, Factory (*make)(const KernelInit&, bool)) {
  r.Register("", op, [make](const KernelInit& init) { return make(init, init.backend == Backend::kCpu); });
}

}  // namespace

void RegisterMovementKernels(KernelRegistry& r) {
  RegisterOp(r, "Transpose", MakeTranspose);
  RegisterOp(r, "Concat", MakeConcat);
  RegisterOp(r, "Split", MakeSplit);
  RegisterOp(r, "Slice", MakeSlice);
  RegisterOp(r, "Gather", MakeGather);
  RegisterOp(r, "Expand", MakeExpand);
  RegisterOp(r, "Pad", MakePad);
  RegisterOp(r, "Tile", MakeTile);
  RegisterOp(r, "Range", MakeRange);
}

}  // namespace whittle
