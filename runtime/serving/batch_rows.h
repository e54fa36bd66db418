// Rows along the batch axis, byte by byte: stacking several requests' tensors into one batch input
// and copying one request's rows back out of a batch output. The data half of BatchingSession
// (runtime/serving/batching_session.cc). Host tensors of whole-byte dtypes only (DTypeSize > 0);
// the caller has checked that the parts share dtype and the dims after axis 0.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "whittle/status.h"
#include "whittle/tensor.h"

namespace whittle::serving {

// Bytes of one row of t (its dims after axis 0); t has rank >= 1 and a whole-byte dtype.
size_t RowBytes(const Tensor& t);

// parts[0], parts[1], ... one after another along axis 0, in a fresh 64-byte-aligned tensor with
// parts[0]'s dtype and quantization. ResourceExhausted when the memory cannot be had.
StatusOr<Tensor> StackRows(const std::vector<const Tensor*>& parts);

// Rows [begin, begin + count) of t, copied into a fresh tensor (the caller owns its rows alone,
// and a batch's buffer is not kept alive by one caller's slice).
StatusOr<Tensor> CopyRows(const Tensor& t, int64_t begin, int64_t count);

}  // namespace whittle::serving
