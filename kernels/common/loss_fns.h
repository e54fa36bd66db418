// The contract between the loss ops' glue (kernels/loss_kernels.cc) and its backends: the
// reduction and options of NegativeLogLikelihoodLoss / SoftmaxCrossEntropyLoss and LossFns, one
// instance per backend (the reference's in kernels/reference/loss.h).
#pragma once

#include <cstdint>

#include "lib/ir/status.h"
#include "lib/ir/tensor.h"

namespace whittle {

enum class LossReduction { kNone, kSum, kMean };

struct LossOptions {
  LossReduction reduction = LossReduction::kMean;
  bool has_ignore_index = false;
  int64_t ignore_index = 0;
};

// The family's compute functions, one instance per backend (kernels/kernel.h BackendTable). Only
// the reference has them today; a backend adds its row to kLoss in kernels/loss_kernels.cc.
struct LossFns {
  Status (*nll)(const Tensor& input, const Tensor& target, const Tensor* weight, const LossOptions& opt,
                Tensor* out) = nullptr;
  Status (*softmax_cross_entropy)(const Tensor& scores, const Tensor& labels, const Tensor* weight,
                                  const LossOptions& opt, Tensor* out, Tensor* log_prob) = nullptr;
};

}  // namespace whittle
