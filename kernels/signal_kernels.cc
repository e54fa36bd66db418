// Kernel glue of ONNX DFT (lib/ops/signal.cc): only the reference kernel exists (a direct sum per
// signal); a fast backend adds its row to kSignal and falls back by returning a null kernel.
#include <string>

#include "kernels/kernel.h"
#include "kernels/reference/signal.h"

namespace whittle {
namespace {

const BackendTable<SignalFns> kSignal{{Backend::kReference, &reference::kSignalFns}};

KernelOr MakeDft(const KernelInit& init) {
  for (const char* a : {"inverse", "onesided"})
    if (const int64_t v = init.attrs.GetInt(a, 0); v != 0 && v != 1)
      return InvalidArgument(init.node_name + ": DFT attribute " + a + " must be 0 or 1, got " + std::to_string(v));
  return kSignal.Make(init.backend, &SignalFns::make_dft, init);
}

}  // namespace

void RegisterSignalKernels(KernelRegistry& r) { DeclareFamily(r, kSignal, &SignalFns::make_dft, "", "DFT", kFloatTypes, MakeDft); }

}  // namespace whittle
