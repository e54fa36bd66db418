// The contract between the DFT glue (kernels/signal_kernels.cc) and its backends: SignalFns, one
// builder row per backend (the reference's in kernels/reference/signal.h).
#pragma once

#include "kernels/kernel.h"

namespace whittle {

// make: the kernel for one node given its opset and attributes (null: the reference runs).
struct SignalFns {
  KernelOr (*make_dft)(const KernelInit& init);
};

}  // namespace whittle
