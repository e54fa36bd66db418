// Kernels for the indexing ops. Each factory reads and validates its attributes once; Compute
// reads the index-like inputs of the call (k, axis, depth) and runs the reference kernel of
// kernels/reference/index.h. These ops move or count bytes, so the CPU provider registers the
// same kernels.
#include <string>
#include <vector>

#include "kernels/kernel.h"
#include "kernels/reference/index.h"

namespace whittle {
namespace {

using Factory = StatusOr<std::unique_ptr<OpKernel>>;

// Single value of an optional scalar-like input; def when absent.
StatusOr<int64_t> ScalarInput(const KernelContext& ctx, size_t i, int64_t def, const char* what) {
  if (i >= ctx.inputs.size() || !ctx.inputs[i]) return def;
  const Tensor& t = *ctx.inputs[i];
  if (t.numel() != 1)
    return InvalidArgument(std::string(what) + " must have one element, got " + DimsToString(t.dims()));
  if (DTypeSize(t.dtype()) == 0 || t.dtype() == DType::kBool || t.dtype() == DType::kFloat16 ||
      t.dtype() == DType::kBFloat16)
    return InvalidArgument(std::string(what) + " has unsupported type " + DTypeName(t.dtype()));
  return ReadIndexElement(t, 0);
}

Factory MakeSize(const KernelInit&) {
  return WrapFnKernel([](KernelContext& ctx) { return SizeReference(*ctx.inputs[0], ctx.outputs[0]); });
}

Factory MakeGatherElements(const KernelInit& init) {
  const int64_t axis_attr = init.attrs.GetInt("axis", 0);
  return WrapFnKernel([axis_attr](KernelContext& ctx) -> Status {
    WH_ASSIGN_OR_RETURN(int64_t axis, KernelAxis(axis_attr, ctx.inputs[0]->rank()));
    return GatherElementsReference(*ctx.inputs[0], *ctx.inputs[1], axis, ctx.outputs[0]);
  });
}

Factory MakeTrilu(const KernelInit& init) {
  const bool upper = init.attrs.GetInt("upper", 1) != 0;
  return WrapFnKernel([upper](KernelContext& ctx) -> Status {
    WH_ASSIGN_OR_RETURN(int64_t k, ScalarInput(ctx, 1, 0, "Trilu k"));
    return TriluReference(*ctx.inputs[0], k, upper, ctx.outputs[0]);
  });
}

Factory MakeCumSum(const KernelInit& init) {
  const bool exclusive = init.attrs.GetInt("exclusive", 0) != 0, reverse = init.attrs.GetInt("reverse", 0) != 0;
  return WrapFnKernel([exclusive, reverse](KernelContext& ctx) -> Status {
    const Tensor& in = *ctx.inputs[0];
    WH_ASSIGN_OR_RETURN(int64_t a, ScalarInput(ctx, 1, 0, "CumSum axis"));
    WH_ASSIGN_OR_RETURN(int64_t axis, KernelAxis(a, in.rank()));
    return CumSumReference(in, axis, exclusive, reverse, ctx.outputs[0]);
  });
}

Factory MakeEyeLike(const KernelInit& init) {
  const int64_t k = init.attrs.GetInt("k", 0);
  return WrapFnKernel([k](KernelContext& ctx) { return EyeLikeReference(k, ctx.outputs[0]); });
}

Factory MakeOneHot(const KernelInit& init) {
  const int64_t axis_attr = init.attrs.GetInt("axis", -1);
  return WrapFnKernel([axis_attr](KernelContext& ctx) -> Status {
    const Tensor& indices = *ctx.inputs[0];
    WH_ASSIGN_OR_RETURN(int64_t depth, ScalarInput(ctx, 1, 0, "OneHot depth"));
    if (depth < 1) return InvalidArgument("OneHot depth must be >= 1, got " + std::to_string(depth));
    WH_ASSIGN_OR_RETURN(int64_t axis, KernelAxis(axis_attr, indices.rank() + 1));
    return OneHotReference(indices, depth, *ctx.inputs[2], axis, ctx.outputs[0]);
  });
}

Factory MakeDepthToSpace(const KernelInit& init) {
  const int64_t b = init.attrs.GetInt("blocksize", 0);
  const std::string mode = init.attrs.GetString("mode", "DCR");
  if (b < 1) return InvalidArgument(init.node_name + ": blocksize must be >= 1");
  if (mode != "DCR" && mode != "CRD") return InvalidArgument(init.node_name + ": mode must be DCR or CRD, got " + mode);
  const bool crd = mode == "CRD";
  return WrapFnKernel([b, crd](KernelContext& ctx) { return DepthToSpaceReference(*ctx.inputs[0], b, crd, ctx.outputs[0]); });
}

Factory MakeSpaceToDepth(const KernelInit& init) {
  const int64_t b = init.attrs.GetInt("blocksize", 0);
  if (b < 1) return InvalidArgument(init.node_name + ": blocksize must be >= 1");
  return WrapFnKernel([b](KernelContext& ctx) { return SpaceToDepthReference(*ctx.inputs[0], b, ctx.outputs[0]); });
}

Factory MakeTopK(const KernelInit& init) {
  const int64_t axis_attr = init.attrs.GetInt("axis", -1);
  const bool largest = init.attrs.GetInt("largest", 1) != 0, sorted = init.attrs.GetInt("sorted", 1) != 0;
  if (init.num_outputs != 2) return InvalidArgument(init.node_name + ": TopK needs its two outputs");
  return WrapFnKernel([=](KernelContext& ctx) -> Status {
    const Tensor& in = *ctx.inputs[0];
    WH_ASSIGN_OR_RETURN(int64_t axis, KernelAxis(axis_attr, in.rank()));
    if (!ctx.outputs[0] || !ctx.outputs[1]) return Unimplemented("TopK with an absent output is not supported");
    return TopKReference(in, axis, largest, sorted, ctx.outputs[0], ctx.outputs[1]);
  });
}

Factory MakeGatherND(const KernelInit& init) {
  const int64_t b = init.attrs.GetInt("batch_dims", 0);
  return WrapFnKernel([b](KernelContext& ctx) { return GatherNDReference(*ctx.inputs[0], *ctx.inputs[1], b, ctx.outputs[0]); });
}

Factory MakeScatterElements(const KernelInit& init) {
  const int64_t axis_attr = init.attrs.GetInt("axis", 0);
  auto red = ParseScatterReduction(init.attrs.GetString("reduction", "none"));
  if (!red.ok()) return InvalidArgument(init.node_name + ": " + red.status().message());
  const ScatterReduction r = *red;
  return WrapFnKernel([axis_attr, r](KernelContext& ctx) -> Status {
    WH_ASSIGN_OR_RETURN(int64_t axis, KernelAxis(axis_attr, ctx.inputs[0]->rank()));
    return ScatterElementsReference(*ctx.inputs[0], *ctx.inputs[1], *ctx.inputs[2], axis, r, ctx.outputs[0]);
  });
}

Factory MakeScatterND(const KernelInit& init) {
  auto red = ParseScatterReduction(init.attrs.GetString("reduction", "none"));
  if (!red.ok()) return InvalidArgument(init.node_name + ": " + red.status().message());
  const ScatterReduction r = *red;
  return WrapFnKernel([r](KernelContext& ctx) {
    return ScatterNDReference(*ctx.inputs[0], *ctx.inputs[1], *ctx.inputs[2], r, ctx.outputs[0]);
  });
}

void RegisterOp(KernelRegistry& r, const std::string& op, Factory (*make)(const KernelInit&)) {
  r.Register("", op, make);
}

}  // namespace

void RegisterIndexKernels(KernelRegistry& r) {
  RegisterOp(r, "Size", MakeSize);
  RegisterOp(r, "GatherElements", MakeGatherElements);
  RegisterOp(r, "Trilu", MakeTrilu);
  RegisterOp(r, "CumSum", MakeCumSum);
  RegisterOp(r, "EyeLike", MakeEyeLike);
  RegisterOp(r, "OneHot", MakeOneHot);
  RegisterOp(r, "DepthToSpace", MakeDepthToSpace);
  RegisterOp(r, "SpaceToDepth", MakeSpaceToDepth);
  RegisterOp(r, "TopK", MakeTopK);
  RegisterOp(r, "GatherND", MakeGatherND);
  RegisterOp(r, "ScatterElements", MakeScatterElements);
  RegisterOp(r, "Scatter", MakeScatterElements);
  RegisterOp(r, "ScatterND", MakeScatterND);
}

}  // namespace whittle
