// Internal to the training engine: how autodiff (runtime/training/autodiff.cc) turns the
// compressed forms a student stores into trainable float params before differentiating —
// quantized (QDQ) weights into float latents behind a fake quantization, binarized layers into
// latents behind SignSte times alpha — and the quantization arithmetic those and the trainer's
// export share. (Block-circulant and codebook layers train as they are: their block vectors and
// codebooks are params of their own ops, differentiated by their rules in lib/ops/*_grad.cc.)
#pragma once

#include <set>
#include <vector>

#include "lib/ir/graph.h"
#include "lib/ir/quant_range.h"  // ZeroPointAt, RangeOf
#include "lib/ir/status.h"
#include "runtime/training/autodiff.h"

namespace whittle::training {

// The channel of element i of a tensor of dims d whose per-axis parameter (scale, zero point)
// has scale.numel() entries along axis.
int64_t ChannelOf(const Tensor& scale, const Dims& d, int64_t axis, int64_t i);
// How many node inputs read value v.
int Readers(const Graph& g, int v);

// Each lifting edits g in place and returns the ids of the values that become params.
StatusOr<std::set<int>> LiftBinaryWeights(Graph& g, std::vector<BinaryParam>* out);
// refresh: live weight scales (QuantizedParam::live_scale); their graph inputs go to *live_inputs.
StatusOr<std::set<int>> LiftQuantizedWeights(Graph& g, std::vector<QuantizedParam>* out, bool refresh,
                                             std::vector<int>* live_inputs);

}  // namespace whittle::training
