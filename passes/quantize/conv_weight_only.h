// Weight-only int8 of Conv layers (--int8 mode=weight-only covers Conv as well as Gemm/MatMul):
// each Conv with a constant float32 weight keeps float activations, and its weight becomes int8
// codes, symmetric per output channel (scale = max|w| / 127 of the channel, no zero point), read
// through a standard DequantizeLinear(axis 0, opset >= 13) that any runtime runs. About 4x smaller
// weights for the rounding error of the weights alone.
//
// The codes come by round-to-nearest, or with method=gptq by GPTQ (passes/quantize/gptq.h) over
// each group's im2col features: the Gram matrix of the patches a group's filters see on the
// calibration data (every output position of each image, up to 4096 sampled ones), one per group,
// so depthwise convolutions get one small (kh·kw)² matrix per channel. Each output channel's scale
// stays max|w| / 127 of its original weights; GPTQ chooses the codes, spreading each tap's rounding
// error over the taps not yet rounded.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "lib/data/dataset.h"
#include "lib/ir/graph.h"
#include "lib/ir/status.h"
#include "passes/layer_selection.h"
#include "passes/pass.h"

namespace whittle {

// Per Conv node name: one Gram matrix per group, (Cin/group·kh·kw)² doubles, row-major, features
// ordered as the weight's [c, i, j].
using ConvGrams = std::map<std::string, std::vector<std::vector<double>>>;

// The Convs of g that QuantizeConvWeightsInt8 would rewrite (selected, constant float32 4-D weight).
std::vector<int> ConvWeightOnlyLayers(const Graph& g, const LayerSelection& select);

// One pass over data: the Gram matrices of the listed Conv nodes' input patches. A Conv whose
// matrices would take more than max_bytes_per_layer is left out (it is rounded to nearest).
StatusOr<ConvGrams> CollectConvGrams(const Graph& g, const std::vector<int>& convs, const Dataset& data,
                                     const PassContext& ctx, int64_t max_bytes_per_layer = int64_t{256} << 20);

// Rewrites every selected Conv of g; each one (or the reason it was left alone) goes to rep. With
// grams, the Convs found there are quantized by GPTQ (a group whose dampened matrix is not
// positive definite falls back to round-to-nearest, with a note).
Status QuantizeConvWeightsInt8(Graph& g, const LayerSelection& select, PassReport* rep,
                               const ConvGrams* grams = nullptr);

}  // namespace whittle
