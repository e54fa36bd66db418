// Kernels for the loss ops: the factory parses reduction/ignore_index once and picks
// init.backend's compute function from kLoss (only the reference has them: losses are evaluated
// on small label tensors, outside the inference hot path).
#include <string>

#include "kernels/kernel.h"
#include "kernels/reference/loss.h"

namespace whittle {
namespace {

using Factory = StatusOr<std::unique_ptr<OpKernel>>;

const BackendTable<LossFns> kLoss{{Backend::kReference, &reference::kLossFns}};

StatusOr<LossOptions> ReadOptions(const KernelInit& init) {
  LossOptions opt;
  auto red = ParseLossReduction(init.attrs.GetString("reduction", "mean"));
  if (!red.ok()) return InvalidArgument(init.node_name + ": " + red.status().message());
  opt.reduction = *red;
  opt.has_ignore_index = init.attrs.Has("ignore_index");
  opt.ignore_index = init.attrs.GetInt("ignore_index", 0);
  return opt;
}

const Tensor* Optional(const KernelContext& ctx, size_t i) { return i < ctx.inputs.size() ? ctx.inputs[i] : nullptr; }

Factory MakeNll(const KernelInit& init) {
  WH_ASSIGN_OR_RETURN(LossOptions opt, ReadOptions(init));
  const auto nll = kLoss.Pick(init.backend, &LossFns::nll);
  return std::unique_ptr<OpKernel>(MakeFnKernel([opt, nll](KernelContext& ctx) {
    return nll(*ctx.inputs[0], *ctx.inputs[1], Optional(ctx, 2), opt, ctx.outputs[0]);
  }));
}

Factory MakeSce(const KernelInit& init) {
  WH_ASSIGN_OR_RETURN(LossOptions opt, ReadOptions(init));
  const auto sce = kLoss.Pick(init.backend, &LossFns::softmax_cross_entropy);
  return std::unique_ptr<OpKernel>(MakeFnKernel([opt, sce](KernelContext& ctx) {
    Tensor* log_prob = ctx.outputs.size() > 1 ? ctx.outputs[1] : nullptr;
    return sce(*ctx.inputs[0], *ctx.inputs[1], Optional(ctx, 2), opt, ctx.outputs[0], log_prob);
  }));
}

}  // namespace

void RegisterLossKernels(KernelRegistry& r) {
  DeclareFamily(r, kLoss, &LossFns::nll, "", "NegativeLogLikelihoodLoss", kFloatTypes, MakeNll);
  DeclareFamily(r, kLoss, &LossFns::softmax_cross_entropy, "", "SoftmaxCrossEntropyLoss", kFloatTypes, MakeSce);
}

}  // namespace whittle
