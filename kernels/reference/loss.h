// Reference kernels for the loss ops NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss
// (ONNX opset 12/13 semantics). input/scores are [N, C, d1..dk], target/labels [N, d1..dk] of
// int32/int64 class ids, weight an optional [C]. Elements whose target equals ignore_index
// contribute 0 loss and 0 weight; 'mean' divides by the summed weight of the rest. Targets
// outside [0, C) that are not ignored are an error. float32 and float64; sums run in double.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/common/loss_fns.h"
#include "lib/ir/status.h"
#include "lib/ir/tensor.h"

namespace whittle {

StatusOr<LossReduction> ParseLossReduction(const std::string& s);

// out: target's dims for kNone, a scalar otherwise.
Status NllLossReference(const Tensor& input, const Tensor& target, const Tensor* weight, const LossOptions& opt,
                        Tensor* out);
// log_prob (may be null): log-softmax of scores over axis 1, scores' dims.
Status SoftmaxCrossEntropyReference(const Tensor& scores, const Tensor& labels, const Tensor* weight,
                                    const LossOptions& opt, Tensor* out, Tensor* log_prob);

namespace reference {
extern const LossFns kLossFns;
}  // namespace reference

}  // namespace whittle
