// Kernels for the indexing ops. Each factory reads and validates its attributes once and picks
// init.backend's compute function from kIndex (only the reference has them: these ops move or
// count bytes); Compute reads the index-like inputs of the call (k, axis, depth) and calls it.
#include <string>
#include <vector>

#include "kernels/kernel.h"
#include "kernels/reference/index.h"

namespace whittle {
namespace {

using Factory = StatusOr<std::unique_ptr<OpKernel>>;

const BackendTable<IndexFns> kIndex{{Backend::kReference, &reference::kIndexFns}};

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

Factory MakeSize(const KernelInit& init) {
  const auto size = kIndex.Pick(init.backend, &IndexFns::size);
  return WrapFnKernel([size](KernelContext& ctx) { return size(*ctx.inputs[0], ctx.outputs[0]); });
}

Factory MakeGatherElements(const KernelInit& init) {
  const int64_t axis_attr = init.attrs.GetInt("axis", 0);
  const auto gather_elements = kIndex.Pick(init.backend, &IndexFns::gather_elements);
  return WrapFnKernel([axis_attr, gather_elements](KernelContext& ctx) -> Status {
    WH_ASSIGN_OR_RETURN(int64_t axis, KernelAxis(axis_attr, ctx.inputs[0]->rank()));
    return gather_elements(*ctx.inputs[0], *ctx.inputs[1], axis, ctx.outputs[0]);
  });
}

Factory MakeTrilu(const KernelInit& init) {
  const bool upper = init.attrs.GetInt("upper", 1) != 0;
  const auto trilu = kIndex.Pick(init.backend, &IndexFns::trilu);
  return WrapFnKernel([upper, trilu](KernelContext& ctx) -> Status {
    WH_ASSIGN_OR_RETURN(int64_t k, ScalarInput(ctx, 1, 0, "Trilu k"));
    return trilu(*ctx.inputs[0], k, upper, ctx.outputs[0]);
  });
}

Factory MakeCumSum(const KernelInit& init) {
  const bool exclusive = init.attrs.GetInt("exclusive", 0) != 0, reverse = init.attrs.GetInt("reverse", 0) != 0;
  const auto cum_sum = kIndex.Pick(init.backend, &IndexFns::cum_sum);
  return WrapFnKernel([exclusive, reverse, cum_sum](KernelContext& ctx) -> Status {
    const Tensor& in = *ctx.inputs[0];
    WH_ASSIGN_OR_RETURN(int64_t a, ScalarInput(ctx, 1, 0, "CumSum axis"));
    WH_ASSIGN_OR_RETURN(int64_t axis, KernelAxis(a, in.rank()));
    return cum_sum(in, axis, exclusive, reverse, ctx.outputs[0]);
  });
}

Factory MakeEyeLike(const KernelInit& init) {
  const int64_t k = init.attrs.GetInt("k", 0);
  const auto eye_like = kIndex.Pick(init.backend, &IndexFns::eye_like);
  return WrapFnKernel([k, eye_like](KernelContext& ctx) { return eye_like(k, ctx.outputs[0]); });
}

Factory MakeOneHot(const KernelInit& init) {
  const int64_t axis_attr = init.attrs.GetInt("axis", -1);
  const auto one_hot = kIndex.Pick(init.backend, &IndexFns::one_hot);
  return WrapFnKernel([axis_attr, one_hot](KernelContext& ctx) -> Status {
    const Tensor& indices = *ctx.inputs[0];
    WH_ASSIGN_OR_RETURN(int64_t depth, ScalarInput(ctx, 1, 0, "OneHot depth"));
    if (depth < 1) return InvalidArgument("OneHot depth must be >= 1, got " + std::to_string(depth));
    WH_ASSIGN_OR_RETURN(int64_t axis, KernelAxis(axis_attr, indices.rank() + 1));
    return one_hot(indices, depth, *ctx.inputs[2], axis, ctx.outputs[0]);
  });
}

Factory MakeDepthToSpace(const KernelInit& init) {
  const int64_t b = init.attrs.GetInt("blocksize", 0);
  const std::string mode = init.attrs.GetString("mode", "DCR");
  if (b < 1) return InvalidArgument(init.node_name + ": blocksize must be >= 1");
  if (mode != "DCR" && mode != "CRD") return InvalidArgument(init.node_name + ": mode must be DCR or CRD, got " + mode);
  const bool crd = mode == "CRD";
  const auto depth_to_space = kIndex.Pick(init.backend, &IndexFns::depth_to_space);
  return WrapFnKernel(
      [b, crd, depth_to_space](KernelContext& ctx) { return depth_to_space(*ctx.inputs[0], b, crd, ctx.outputs[0]); });
}

Factory MakeSpaceToDepth(const KernelInit& init) {
  const int64_t b = init.attrs.GetInt("blocksize", 0);
  const std::string mode = init.attrs.GetString("mode", "DCR");  // the attribute is opset 28's
  if (b < 1) return InvalidArgument(init.node_name + ": blocksize must be >= 1");
  if (mode != "DCR" && mode != "CRD") return InvalidArgument(init.node_name + ": mode must be DCR or CRD, got " + mode);
  const bool crd = mode == "CRD";
  const auto space_to_depth = kIndex.Pick(init.backend, &IndexFns::space_to_depth);
  return WrapFnKernel(
      [b, crd, space_to_depth](KernelContext& ctx) { return space_to_depth(*ctx.inputs[0], b, crd, ctx.outputs[0]); });
}

Factory MakeTopK(const KernelInit& init) {
  const int64_t axis_attr = init.attrs.GetInt("axis", -1);
  const bool largest = init.attrs.GetInt("largest", 1) != 0, sorted = init.attrs.GetInt("sorted", 1) != 0;
  if (init.num_outputs != 2) return InvalidArgument(init.node_name + ": TopK needs its two outputs");
  const auto top_k = kIndex.Pick(init.backend, &IndexFns::top_k);
  return WrapFnKernel([=](KernelContext& ctx) -> Status {
    const Tensor& in = *ctx.inputs[0];
    WH_ASSIGN_OR_RETURN(int64_t axis, KernelAxis(axis_attr, in.rank()));
    if (!ctx.outputs[0] || !ctx.outputs[1]) return Unimplemented("TopK with an absent output is not supported");
    return top_k(in, axis, largest, sorted, ctx.outputs[0], ctx.outputs[1]);
  });
}

Factory MakeGatherND(const KernelInit& init) {
  const int64_t b = init.attrs.GetInt("batch_dims", 0);
  const auto gather_nd = kIndex.Pick(init.backend, &IndexFns::gather_nd);
  return WrapFnKernel([b, gather_nd](KernelContext& ctx) {
    return gather_nd(*ctx.inputs[0], *ctx.inputs[1], b, ctx.outputs[0]);
  });
}

Factory MakeScatterElements(const KernelInit& init) {
  const int64_t axis_attr = init.attrs.GetInt("axis", 0);
  auto red = ParseScatterReduction(init.attrs.GetString("reduction", "none"));
  if (!red.ok()) return InvalidArgument(init.node_name + ": " + red.status().message());
  const ScatterReduction r = *red;
  const auto scatter_elements = kIndex.Pick(init.backend, &IndexFns::scatter_elements);
  return WrapFnKernel([axis_attr, r, scatter_elements](KernelContext& ctx) -> Status {
    WH_ASSIGN_OR_RETURN(int64_t axis, KernelAxis(axis_attr, ctx.inputs[0]->rank()));
    return scatter_elements(*ctx.inputs[0], *ctx.inputs[1], *ctx.inputs[2], axis, r, ctx.outputs[0]);
  });
}

Factory MakeScatterND(const KernelInit& init) {
  auto red = ParseScatterReduction(init.attrs.GetString("reduction", "none"));
  if (!red.ok()) return InvalidArgument(init.node_name + ": " + red.status().message());
  const ScatterReduction r = *red;
  const auto scatter_nd = kIndex.Pick(init.backend, &IndexFns::scatter_nd);
  return WrapFnKernel([r, scatter_nd](KernelContext& ctx) {
    return scatter_nd(*ctx.inputs[0], *ctx.inputs[1], *ctx.inputs[2], r, ctx.outputs[0]);
  });
}

Factory MakeNonZero(const KernelInit& init) {
  const auto non_zero = kIndex.Pick(init.backend, &IndexFns::non_zero);
  return WrapFnKernel([non_zero](KernelContext& ctx) { return non_zero(*ctx.inputs[0], ctx.outputs[0]); });
}

}  // namespace

void RegisterIndexKernels(KernelRegistry& r) {
  DeclareFamily(r, kIndex, &IndexFns::size, "", "Size", kAllTypes, MakeSize);
  DeclareFamily(r, kIndex, &IndexFns::gather_elements, "", "GatherElements", kAllTypes, MakeGatherElements);
  DeclareFamily(r, kIndex, &IndexFns::trilu, "", "Trilu", kAllTypes, MakeTrilu);
  DeclareFamily(r, kIndex, &IndexFns::cum_sum, "", "CumSum", kNumericTypes, MakeCumSum);
  DeclareFamily(r, kIndex, &IndexFns::eye_like, "", "EyeLike", kAllTypes, MakeEyeLike);
  DeclareFamily(r, kIndex, &IndexFns::one_hot, "", "OneHot", kNumericTypes, MakeOneHot);
  DeclareFamily(r, kIndex, &IndexFns::depth_to_space, "", "DepthToSpace", kAllTypes, MakeDepthToSpace);
  DeclareFamily(r, kIndex, &IndexFns::space_to_depth, "", "SpaceToDepth", kAllTypes, MakeSpaceToDepth);
  DeclareFamily(r, kIndex, &IndexFns::top_k, "", "TopK", kNumericTypes, MakeTopK);
  DeclareFamily(r, kIndex, &IndexFns::gather_nd, "", "GatherND", kAllTypes, MakeGatherND);
  DeclareFamily(r, kIndex, &IndexFns::scatter_elements, "", "ScatterElements", kAllTypes, MakeScatterElements);
  DeclareFamily(r, kIndex, &IndexFns::scatter_elements, "", "Scatter", kAllTypes, MakeScatterElements);
  DeclareFamily(r, kIndex, &IndexFns::scatter_nd, "", "ScatterND", kAllTypes, MakeScatterND);
  DeclareFamily(r, kIndex, &IndexFns::non_zero, "", "NonZero", kAllTypes, MakeNonZero);
}

}  // namespace whittle
