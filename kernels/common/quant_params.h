// Quantization parameters of QuantizeLinear / DequantizeLinear, shared by every backend (which
// must be bit-identical): ResolveQuantLayout validates scale and zero point against x (dtype,
// per-tensor or per-axis length) and describes x as [outer, channels, inner] blocks with one
// scale per channel; ZeroPointAt reads one zero point whatever its integer type.
#pragma once

#include <cstdint>

#include "lib/ir/status.h"
#include "lib/ir/tensor.h"

namespace whittle {

struct QuantLayout {
  int64_t outer = 1, channels = 1, inner = 1;
};

// zp may be null (zero point 0). axis is only used when scale has more than one element.
StatusOr<QuantLayout> ResolveQuantLayout(const Tensor& x, const Tensor& scale, const Tensor* zp, int64_t axis);
// Zero point of channel c as int64 (0 when zp is null).
int64_t ZeroPointAt(const Tensor* zp, int64_t c);

}  // namespace whittle
