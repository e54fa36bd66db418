// The CUDA backend's declarations: DeclareCudaKernel (the runtime check and the fused activations
// the kernels' epilogues lack, run after the kernel in place) and RegisterKernels, which calls
// each family's declarations (one file per family, as kernels/cpu/).
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/common/fused_activation.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/nbits.h"
#include "kernels/kernel.h"

namespace whittle::cuda {

void RegisterRuntime();  // runtime.cc

bool TwoD(const AttributeMap& at, const char* key, size_t n) {
  return !at.Has(key) || at.GetInts(key, {}).size() == n;
}

bool FusedKind(const AttributeMap& a, Unary* act, std::initializer_list<const char*> also) {
  for (const auto& [name, value] : a.all()) {
    if (name.rfind('_', 0) != 0 || name == "_activation" || name == "_alpha" || name == "_beta" || name == "_min" ||
        name == "_max")
      continue;
    if (std::find_if(also.begin(), also.end(), [&name = name](const char* s) { return name == s; }) == also.end())
      return false;
  }
  const FusedActivation f = FusedActivation::FromAttrs(a);
  if (f.kind != FusedActivation::kNone && f.kind != FusedActivation::kRelu) return false;
  *act = f.kind == FusedActivation::kRelu ? Unary::kRelu : Unary::kIdentity;
  return true;
}

namespace {

// The element-wise op and its parameters for a fused activation the kernels' epilogues do not
// take (all but Relu: FusedKind), with FusedActivation's semantics.
bool SeparateActivation(const AttributeMap& a, Unary* op, float* alpha, float* beta) {
  const FusedActivation f = FusedActivation::FromAttrs(a);
  *alpha = f.alpha;
  *beta = f.beta;
  switch (f.kind) {
    case FusedActivation::kLeakyRelu: *op = Unary::kLeakyRelu; return true;
    case FusedActivation::kSigmoid: *op = Unary::kSigmoid; return true;
    case FusedActivation::kTanh: *op = Unary::kTanh; return true;
    case FusedActivation::kClip:
      *op = Unary::kClip;
      *alpha = f.min;
      *beta = f.max;
      return true;
    case FusedActivation::kHardSigmoid: *op = Unary::kHardSigmoid; return true;
    case FusedActivation::kHardSwish: *op = Unary::kHardSwish; return true;
    case FusedActivation::kSilu: *op = Unary::kSilu; return true;
    default: return false;
  }
}

// A device kernel built without its fused activation, which then runs as the element-wise kernel
// in place on output 0.
class ThenActivation : public OpKernel {
 public:
  ThenActivation(std::unique_ptr<OpKernel> inner, Unary op, float alpha, float beta)
      : inner_(std::move(inner)), op_(op), alpha_(alpha), beta_(beta) {}
  Status Compute(KernelContext& ctx) const override {
    WH_RETURN_IF_ERROR(inner_->Compute(ctx));
    Tensor& y = *ctx.outputs[0];
    if (y.dtype() != DType::kFloat32) return Internal("a fused activation on a non-float32 output");
    LaunchUnary(op_, y.data<float>(), y.data<float>(), y.numel(), alpha_, Stream(), beta_);
    return Launched("fused activation");
  }
  DeviceType device() const override { return inner_->device(); }
  uint64_t HostInputs() const override { return inner_->HostInputs(); }
  bool ChecksOnDevice() const override { return inner_->ChecksOnDevice(); }
  Status DeviceCheckError(const int64_t* report) const override { return inner_->DeviceCheckError(report); }

 private:
  std::unique_ptr<OpKernel> inner_;
  Unary op_;
  float alpha_, beta_;
};

// make(init) without init's fused activation, wrapped to apply it after Compute; null when the
// activation is none of SeparateActivation's or make declines the node. Float inputs only: an
// integer kernel's output is not float (it falls back as before). The factories copy what they
// keep of the attributes, so a local map serves.
KernelOr WithSeparateActivation(const KernelInit& init, const MakeFn& make) {
  Unary op;
  float alpha = 0.f, beta = 0.f;
  if (init.num_outputs != 1 || !init.AllFloat32() || !SeparateActivation(init.attrs, &op, &alpha, &beta))
    return KernelOr(nullptr);
  AttributeMap attrs = init.attrs;
  for (const char* k : {"_activation", "_alpha", "_beta", "_min", "_max"}) attrs.Erase(k);
  const KernelInit bare{attrs,          init.opset,   init.input_dtypes, init.const_inputs, init.num_outputs,
                        init.node_name, init.backend, init.precision,    init.input_ranks};
  KernelOr k = make(bare);
  if (!k.ok()) return k;
  if (!*k || (*k)->OutputAliasesInput() >= 0) return KernelOr(nullptr);
  return std::unique_ptr<OpKernel>(new ThenActivation(std::move(*k), op, alpha, beta));
}

}  // namespace

void DeclareCudaKernel(KernelRegistry& r, const char* domain, const char* op, std::vector<DType> dtypes, MakeFn make) {
  r.Add(DeclareKernel(Backend::kCuda, domain, op, std::move(dtypes), [make](const KernelInit& init) -> KernelOr {
    if (!RuntimeActive()) return KernelOr(nullptr);
    KernelOr k = make(init);
    if (!k.ok() || *k) return k;
    // A fused activation the kernel's epilogue lacks (it takes Relu): the kernel without it,
    // then the activation in place, rather than the whole node on the CPU.
    return WithSeparateActivation(init, make);
  }));
}

void RegisterKernels(KernelRegistry& r) {
  RegisterRuntime();
  RegisterElementwiseKernels(r);
  RegisterSoftmaxKernels(r);
  RegisterNormKernels(r);
  RegisterAttentionKernels(r);
  RegisterLinearKernels(r);
  RegisterConvKernels(r);
  RegisterPoolKernels(r);
  RegisterReduceKernels(r);
  RegisterQLinearKernels(r);
  RegisterBinaryCodebookKernels(r);
  RegisterCirculantFftKernels(r);
  RegisterMovementKernels(r);
  RegisterResizeKernels(r);
  RegisterRecurrentKernels(r);
  RegisterNBitsKernels(r);
}

}  // namespace whittle::cuda
