// The optimizer's element-wise work per device: the trainer (runtime/training/trainer.cc) keeps
// its parameters, their gradients and the optimizer state on its backend's device and updates
// them in place there, through the functions the device registers here — the CPU's below, the
// CUDA backend's in kernels/cuda/param_update.cu (registered with its DeviceRuntime), a test's
// stand-in for a fake device. Pointers are to memory on that device.
#pragma once

#include <cstdint>

#include "kernels/param_update_rule.h"
#include "lib/ir/status.h"
#include "lib/ir/tensor.h"

namespace whittle {

struct ParamUpdates {
  // *sum = the sum of g[i]^2 over n floats, in double; the result does not depend on `threads`
  // (waits for the device).
  Status (*sum_squares)(const float* g, int64_t n, int threads, double* sum) = nullptr;
  // UpdateAt over [0, n) (queued on a device; errors may surface at its next synchronization).
  Status (*update)(const UpdateHyper& h, float* p, const float* g, float* m, float* v, int64_t n, int threads) = nullptr;
};

// u null unregisters; u must outlive its use. Thread-safe.
void RegisterParamUpdates(DeviceType device, const ParamUpdates* u);
// The CPU's are always there; another device's once its backend (or a test) registered them.
const ParamUpdates* ParamUpdatesFor(DeviceType device);

}  // namespace whittle
