// Raising a model's default-domain opset to 13 for --int8 (per-axis QuantizeLinear /
// DequantizeLinear need it). Only ops whose semantics are the same at 13 are accepted as they
// are; a few whose attributes became inputs are converted (Squeeze/Unsqueeze axes, Clip
// min/max, Dropout ratio); anything else is refused with the op and the reason, before the
// graph is touched.
#pragma once

#include <string>
#include <vector>

#include "lib/ir/graph.h"

namespace whittle::quant {

constexpr int64_t kQuantOpset = 13;

// No-op when the opset is already >= 13. *notes gets one line per conversion made.
Status UpgradeOpsetTo13(Graph& g, std::vector<std::string>* notes);

}  // namespace whittle::quant
