// Test ops with kernels on the stand-in device (tests/util/fake_device.h), in the test.device
// domain, for tests of the session's device placement, copies and CUDA graphs on any machine:
// standard ops have no kernel for the stand-in and fall back to the CPU, these claim the device.
#pragma once

#include <memory>

#include "kernels/kernel.h"
#include "lib/ir/graph.h"
#include "lib/ir/status.h"
#include "whittle/session.h"

namespace whittle::testing {

// Registers test.device `op` (inputs min..max; output 0 of input 0's shape and dtype) with a
// kernel factory.
void RegisterDeviceOp(const char* op, int min_inputs, int max_inputs, KernelFactory make);
// test.device DevAffine(X[, B]) = 2 X (+ B), float32, B of X's shape: on the stand-in device when
// the session asks for the CUDA backend (it refuses a tensor that is not the device's own), on the
// CPU otherwise.
void RegisterDevAffine();
// test.device DevCopy(X) = X, any dtype, on the device (its inference reads no value).
void RegisterDevCopy();
// test.device DevFail(X): a device kernel that fails ("DevFail refuses") before it queues any work.
void RegisterDevFail();
// g with its test ops (the ops named Dev*) in the test.device domain.
Graph OnTestDevice(Graph g);
// A session of g (after OnTestDevice) on the CUDA backend, i.e. the stand-in device.
StatusOr<std::unique_ptr<Session>> LoadOnDevice(Graph g);
// x[2,3] -> DevAffine -> Relu (CPU) -> DevAffine(+ constant) -> Reshape (alias) -> Add (CPU) -> DevAffine
Graph MakeMixed();

}  // namespace whittle::testing
