// Kernels for the data-movement ops. Each factory reads the attributes once and picks
// init.backend's compute function from kMovement; Compute reads the index inputs (starts, pads,
// axes ...) of the call, resolves them with kernels/common/index.h and calls it.
#include <algorithm>
#include <string>
#include <vector>

#include "kernels/common/index.h"
#include "kernels/cpu/movement.h"
#include "kernels/kernel.h"
#include "kernels/reference/movement.h"
#include "lib/ir/pads.h"

namespace whittle {
namespace {

using Factory = StatusOr<std::unique_ptr<OpKernel>>;

const BackendTable<MovementFns> kMovement{{Backend::kReference, &reference::kMovementFns},
                                          {Backend::kCpu, &cpu::kMovementFns}};

// Values of an optional int32/int64 index input; empty when absent.
StatusOr<std::vector<int64_t>> IndexInput(const KernelContext& ctx, size_t i, const char* what) {
  return IndexValues(i < ctx.inputs.size() ? ctx.inputs[i] : nullptr, what);
}

Factory MakeTranspose(const KernelInit& init) {
  const std::vector<int64_t> perm_attr = init.attrs.GetInts("perm");
  const auto transpose = kMovement.Pick(init.backend, &MovementFns::transpose);
  return WrapFnKernel([perm_attr, transpose](KernelContext& ctx) -> Status {
    const Tensor& in = *ctx.inputs[0];
    WH_ASSIGN_OR_RETURN(std::vector<int64_t> perm, ResolvePerm(perm_attr, in.rank()));
    return transpose(in, perm, ctx.outputs[0], ctx.num_threads);
  });
}

Factory MakeConcat(const KernelInit& init) {
  const int64_t axis_attr = init.attrs.GetInt("axis", 0);
  const auto concat = kMovement.Pick(init.backend, &MovementFns::concat);
  return WrapFnKernel([axis_attr, concat](KernelContext& ctx) -> Status {
    std::vector<const Tensor*> ins;
    for (const Tensor* t : ctx.inputs) {
      if (!t) return InvalidArgument("Concat inputs may not be absent");
      if (t->rank() != ctx.outputs[0]->rank() || t->dtype() != ctx.outputs[0]->dtype())
        return InvalidArgument("Concat inputs must share the output's rank and type");
      ins.push_back(t);
    }
    WH_ASSIGN_OR_RETURN(int64_t axis, KernelAxis(axis_attr, ctx.outputs[0]->rank()));
    return concat(ins, axis, ctx.outputs[0], ctx.num_threads);
  });
}

Factory MakeSplit(const KernelInit& init) {
  const int64_t axis_attr = init.attrs.GetInt("axis", 0);
  const auto split = kMovement.Pick(init.backend, &MovementFns::split);
  return WrapFnKernel([axis_attr, split](KernelContext& ctx) -> Status {
    const Tensor& in = *ctx.inputs[0];
    for (const Tensor* t : ctx.outputs)
      if (!t) return Unimplemented("Split with an absent output is not supported");
    WH_ASSIGN_OR_RETURN(int64_t axis, KernelAxis(axis_attr, in.rank()));
    return split(in, axis, ctx.outputs, ctx.num_threads);
  });
}

Factory MakeSlice(const KernelInit& init) {
  const int opset = init.opset;
  const auto slice = kMovement.Pick(init.backend, &MovementFns::slice);
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
    return slice(in, p, ctx.outputs[0], ctx.num_threads);
  });
}

Factory MakeGather(const KernelInit& init) {
  const int64_t axis_attr = init.attrs.GetInt("axis", 0);
  const auto gather = kMovement.Pick(init.backend, &MovementFns::gather);
  return WrapFnKernel([axis_attr, gather](KernelContext& ctx) -> Status {
    const Tensor& data = *ctx.inputs[0];
    const Tensor& indices = *ctx.inputs[1];
    WH_ASSIGN_OR_RETURN(int64_t axis, KernelAxis(axis_attr, data.rank()));
    return gather(data, indices, axis, ctx.outputs[0], ctx.num_threads);
  });
}

Factory MakeExpand(const KernelInit& init) {
  const auto expand = kMovement.Pick(init.backend, &MovementFns::expand);
  return WrapFnKernel(
      [expand](KernelContext& ctx) -> Status { return expand(*ctx.inputs[0], ctx.outputs[0], ctx.num_threads); });
}

Factory MakePad(const KernelInit& init) {
  WH_ASSIGN_OR_RETURN(PadMode mode, ParsePadMode(init.attrs.GetString("mode", "constant")));
  const auto pad = kMovement.Pick(init.backend, &MovementFns::pad);
  const int opset = init.opset;
  const std::vector<int64_t> pads_attr = init.attrs.GetInts("pads");
  const float value_attr = init.attrs.GetFloat("value", 0.f);
  return WrapFnKernel([=](KernelContext& ctx) -> Status {
    const Tensor& in = *ctx.inputs[0];
    std::vector<int64_t> pads = pads_attr;
    uint64_t bits = 0;
    if (opset >= 11) {
      WH_ASSIGN_OR_RETURN(pads, IndexInput(ctx, 1, "pads"));
      if (opset >= 18 && ctx.inputs.size() > 3 && ctx.inputs[3]) {
        WH_ASSIGN_OR_RETURN(std::vector<int64_t> axes, IndexInput(ctx, 3, "axes"));
        WH_ASSIGN_OR_RETURN(pads, PadsForAllAxes(pads, axes, in.rank()));
      }
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
    return pad(in, pads, mode, bits, ctx.outputs[0], ctx.num_threads);
  });
}

Factory MakeTile(const KernelInit& init) {
  const auto tile = kMovement.Pick(init.backend, &MovementFns::tile);
  return WrapFnKernel(
      [tile](KernelContext& ctx) -> Status { return tile(*ctx.inputs[0], ctx.outputs[0], ctx.num_threads); });
}

Factory MakeRange(const KernelInit& init) {
  const auto range = kMovement.Pick(init.backend, &MovementFns::range);
  return WrapFnKernel([range](KernelContext& ctx) -> Status {
    return range(*ctx.inputs[0], *ctx.inputs[2], ctx.outputs[0], ctx.num_threads);
  });
}

}  // namespace

void RegisterMovementKernels(KernelRegistry& r) {
  DeclareFamily(r, kMovement, &MovementFns::transpose, "", "Transpose", kAllTypes, MakeTranspose);
  DeclareFamily(r, kMovement, &MovementFns::concat, "", "Concat", kAllTypes, MakeConcat);
  DeclareFamily(r, kMovement, &MovementFns::split, "", "Split", kAllTypes, MakeSplit);
  DeclareFamily(r, kMovement, &MovementFns::slice, "", "Slice", kAllTypes, MakeSlice);
  DeclareFamily(r, kMovement, &MovementFns::gather, "", "Gather", kAllTypes, MakeGather);
  DeclareFamily(r, kMovement, &MovementFns::expand, "", "Expand", kAllTypes, MakeExpand);
  DeclareFamily(r, kMovement, &MovementFns::pad, "", "Pad", kAllTypes, MakePad);
  DeclareFamily(r, kMovement, &MovementFns::tile, "", "Tile", kAllTypes, MakeTile);
  DeclareFamily(r, kMovement, &MovementFns::range, "", "Range", kNumericHalfTypes, MakeRange);
}

}  // namespace whittle
