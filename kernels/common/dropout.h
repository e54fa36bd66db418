// Dropout pieces shared by every backend: the parsed attributes, the per-call resolution of
// ratio / training_mode, the random stream, and DropoutFns, the per-backend kernel builders.
// Training mode (opset 12+, ratio > 0): mask = U >= ratio, Y = X * mask * (1 / (1 - ratio)),
// where U is numpy's legacy RandomState(seed).uniform(0, 1, X.shape) — MT19937 seeded with
// init_genrand(seed), each U from two 32-bit draws as (a >> 5, b >> 6) / 2^53 — so a model
// with a seed attribute gives exactly the mask onnx.reference and the ONNX backend test data give.
// With a seed the op is a pure function of its inputs (every call draws the same mask, as the
// ONNX reference does); without one each call takes a fresh seed (DropoutCallSeed).
#pragma once

#include <cstdint>

#include "kernels/kernel.h"

namespace whittle {

struct DropoutAttrs {
  bool has_seed = false;
  uint32_t seed = 0;  // the low 32 bits of the seed attribute (numpy's seeds are 0 .. 2^32-1)
  int opset = 0;
};
StatusOr<DropoutAttrs> ParseDropoutAttrs(const KernelInit& init);

// The MT19937 seed of one call: the attribute's, or a fresh one (process-wide random_device
// entropy mixed with a call counter) when the node has none.
uint32_t DropoutCallSeed(const DropoutAttrs& a);

// 1 / (1 - ratio) rounded once, as onnx.reference computes it (in double).
inline double DropoutScale(double ratio) { return 1.0 / (1.0 - ratio); }

// U >= ratio  <=>  the 53-bit integer k = U * 2^53 is >= ceil(ratio * 2^53) (exact: k < 2^53 and
// ratio * 2^53 is a power-of-two scaling). Backends compare integers with this threshold.
uint64_t DropoutKeepThreshold(double ratio);

// One Dropout call's inputs, resolved: training is true only when training_mode is a true bool
// scalar and the ratio is not 0 (training with ratio 0 keeps every element: the identity).
struct DropoutCall {
  const Tensor* x = nullptr;
  Tensor* y = nullptr;
  Tensor* mask = nullptr;  // absent: nullptr
  double ratio = 0.5;
  bool training = false;
};
// Checks ratio (a float scalar in [0, 1)) and training_mode (a bool scalar).
Status ResolveDropoutCall(const KernelContext& ctx, const DropoutAttrs& a, DropoutCall* call);

// Reads ratio / training_mode from constant tensors (the factories' alias decision); ratio may be
// nullptr (0.5). Same checks as ResolveDropoutCall.
StatusOr<double> DropoutRatio(const Tensor* ratio);
StatusOr<bool> DropoutTrainingMode(const Tensor* training_mode);

// A backend's Dropout kernel builder for calls that may train (nullptr or a null kernel: the
// reference is used).
struct DropoutFns {
  KernelOr (*dropout)(const DropoutAttrs& a, const KernelInit& init);
};

}  // namespace whittle
