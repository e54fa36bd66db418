// Registration of the reduction kernels: Reduce*, ArgMax/ArgMin and the Softmax family.
// Factories read attributes once and pick init.backend's compute function from kReduce; axes given as an input (ReduceSum from opset 13, the others from 18)
// are read per call. Axis validity depends on the input rank, so it is checked in Compute (shape
// inference has already rejected bad axes; this is a second line of defence).
#include <cstring>
#include <string>
#include <utility>

#include "kernels/common/dtype_dispatch.h"
#include "kernels/common/index.h"
#include "kernels/cpu/reduce.h"
#include "kernels/kernel.h"
#include "kernels/reference/reduce.h"

namespace whittle {
namespace {

using reference::ReduceFns;
using reference::ReduceOp;
using reference::SoftmaxOp;
using ew::TypeSet;

const BackendTable<ReduceFns> kReduce{{Backend::kReference, &reference::kReduceFns}, {Backend::kCpu, &cpu::kReduceFns}};

Status NeedInput0(const KernelContext& ctx) {
  if (ctx.inputs.empty() || !ctx.inputs[0]) return InvalidArgument("required input 0 is missing");
  if (ctx.outputs.empty() || !ctx.outputs[0]) return Internal("missing output");
  return Status::Ok();
}

KernelOr MakeReduce(const KernelInit& init, ReduceOp op) {
  WH_RETURN_IF_ERROR(ew::CheckDType(init, 0, TypeSet::kNumeric, reference::ReduceOpName(op)));
  const bool axes_input = init.opset >= (op == ReduceOp::kSum ? 13 : 18);
  const bool noop_on_empty = axes_input && init.attrs.GetInt("noop_with_empty_axes", 0) != 0;
  const std::vector<int64_t> attr_axes = init.attrs.GetInts("axes");
  const reference::ReduceFn reduce = kReduce.Pick(init.backend, &ReduceFns::reduce);
  return MakeFnKernel([op, reduce, axes_input, noop_on_empty, attr_axes](KernelContext& ctx) -> Status {
    WH_RETURN_IF_ERROR(NeedInput0(ctx));
    std::vector<int64_t> axes = attr_axes;
    if (axes_input && ctx.inputs.size() > 1 && ctx.inputs[1]) {
      const Tensor& t = *ctx.inputs[1];
      if (t.dtype() != DType::kInt64 && t.dtype() != DType::kInt32)
        return InvalidArgument(std::string("axes must be int64, got ") + DTypeName(t.dtype()));
      axes = ew::IntValues(t);
    }
    const Tensor& x = *ctx.inputs[0];
    Tensor& out = *ctx.outputs[0];
    if (axes.empty()) {
      if (noop_on_empty) {
        if (out.nbytes() != x.nbytes() || out.dtype() != x.dtype()) return Internal("noop reduction output mismatch");
        if (x.nbytes()) std::memcpy(out.raw_data(), x.raw_data(), x.nbytes());
        return Status::Ok();
      }
      for (int i = 0; i < x.rank(); ++i) axes.push_back(i);
    }
    WH_ASSIGN_OR_RETURN(std::vector<int64_t> norm, NormalizeAxes(axes, x.rank()));
    return ew::RunWithHalfAsFloat(ctx, [op, reduce, &norm](KernelContext& c) {
      return reduce(op, *c.inputs[0], norm, *c.outputs[0], c.num_threads);
    });
  });
}

KernelOr MakeArg(const KernelInit& init, bool is_max) {
  WH_RETURN_IF_ERROR(ew::CheckDType(init, 0, TypeSet::kNumeric, is_max ? "ArgMax" : "ArgMin"));
  const int64_t axis = init.attrs.GetInt("axis", 0);
  const bool last = init.attrs.GetInt("select_last_index", 0) != 0;
  const reference::ArgReduceFn arg_reduce = kReduce.Pick(init.backend, &ReduceFns::arg_reduce);
  return MakeFnKernel([is_max, axis, last, arg_reduce](KernelContext& ctx) -> Status {
    WH_RETURN_IF_ERROR(NeedInput0(ctx));
    return ew::RunWithHalfAsFloat(ctx, [is_max, axis, last, arg_reduce](KernelContext& c) {
      return arg_reduce(is_max, *c.inputs[0], axis, last, *c.outputs[0], c.num_threads);
    });
  });
}

KernelOr MakeSoftmax(const KernelInit& init, SoftmaxOp op) {
  WH_RETURN_IF_ERROR(ew::CheckDType(init, 0, TypeSet::kFloat, "Softmax"));
  // Before opset 13 the input is coerced to 2D at axis (default 1); from 13 it is per-axis.
  const bool coerce_2d = init.opset < 13;
  const int64_t axis = init.attrs.GetInt("axis", coerce_2d ? 1 : -1);
  const reference::SoftmaxFn softmax = kReduce.Pick(init.backend, &ReduceFns::softmax);
  return MakeFnKernel([op, softmax, coerce_2d, axis](KernelContext& ctx) -> Status {
    WH_RETURN_IF_ERROR(NeedInput0(ctx));
    return ew::RunWithHalfAsFloat(ctx, [op, softmax, coerce_2d, axis](KernelContext& c) {
      return softmax(op, *c.inputs[0], axis, coerce_2d, *c.outputs[0], c.num_threads);
    });
  });
}

}  // namespace

void RegisterReduceKernels(KernelRegistry& r) {
  const std::pair<const char*, ReduceOp> reduce[] = {
      {"ReduceSum", ReduceOp::kSum},   {"ReduceMean", ReduceOp::kMean},       {"ReduceMax", ReduceOp::kMax},
      {"ReduceMin", ReduceOp::kMin},   {"ReduceProd", ReduceOp::kProd},       {"ReduceL1", ReduceOp::kL1},
      {"ReduceL2", ReduceOp::kL2},     {"ReduceSumSquare", ReduceOp::kSumSquare},
      {"ReduceLogSum", ReduceOp::kLogSum}, {"ReduceLogSumExp", ReduceOp::kLogSumExp}};
  const std::pair<const char*, SoftmaxOp> softmax[] = {
      {"Softmax", SoftmaxOp::kSoftmax}, {"LogSoftmax", SoftmaxOp::kLogSoftmax}, {"Hardmax", SoftmaxOp::kHardmax}};
  for (const auto& [name, op] : reduce)
    DeclareFamily(r, kReduce, &ReduceFns::reduce, "", name, kNumericHalfTypes,
                  [op = op](const KernelInit& init) { return MakeReduce(init, op); });
  for (const auto& [name, op] : softmax)
    DeclareFamily(r, kReduce, &ReduceFns::softmax, "", name, kFloatHalfTypes,
                  [op = op](const KernelInit& init) { return MakeSoftmax(init, op); });
  DeclareFamily(r, kReduce, &ReduceFns::arg_reduce, "", "ArgMax", kNumericHalfTypes, [](const KernelInit& init) { return MakeArg(init, true); });
  DeclareFamily(r, kReduce, &ReduceFns::arg_reduce, "", "ArgMin", kNumericHalfTypes, [](const KernelInit& init) { return MakeArg(init, false); });
}

}  // namespace whittle
