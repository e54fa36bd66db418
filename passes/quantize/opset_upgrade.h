// Raising a model's default-domain opset: to 13 for --int8 (per-axis QuantizeLinear /
// DequantizeLinear need it), to 21 for --int4 (DequantizeLinear with block_size on int4). An op is carried as it is when its ONNX schema history between the
// two opsets shows only compatible changes (lib/ops/schema_compat.h); ops whose attributes
// became inputs are converted (Squeeze/Unsqueeze/ReduceSum axes, Split split, Clip min/max,
// Dropout ratio; from 18 every other Reduce* op's axes); Softmax-like ops pass when their axis is the last one; anything else is
// refused with the op and the schema change that blocks it, before the graph is touched.
#pragma once

#include <string>
#include <vector>

#include "lib/ir/graph.h"

namespace whittle::quant {

constexpr int64_t kQuantOpset = 13;

// No-op when the opset is already >= 13. *notes gets one line per conversion made.
Status UpgradeOpsetTo13(Graph& g, std::vector<std::string>* notes);
// The same to opset `to` (13..21); `flag` and `purpose` name why in messages ("--int4",
// "blocked int4 DequantizeLinear"). No-op when the opset is already >= to.
Status UpgradeOpset(Graph& g, int64_t to, const std::string& flag, const std::string& purpose,
                    std::vector<std::string>* notes);

}  // namespace whittle::quant
