// Index and axis resolution shared by every backend's kernels: attribute and index-input values
// (perm, starts/ends/axes/steps, pads, reduction axes, index elements) validated against the
// input's dims and turned into per-axis parameters. Bad values come back as Status; the kernels
// then only see parameters that are in range.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lib/ir/status.h"
#include "lib/ir/tensor.h"

namespace whittle {

// perm attribute (empty = reverse) validated against rank.
StatusOr<std::vector<int64_t>> ResolvePerm(const std::vector<int64_t>& perm, int rank);

// Values of an optional int32/int64 index input (t null: absent, empty). Slice's starts, ends,
// axes and steps on every backend.
StatusOr<std::vector<int64_t>> IndexValues(const Tensor* t, const char* what);

// Per-axis first input index and step of a slice, for every axis of the input (unsliced axes:
// start 0, step 1). len is the output size, which must match the preallocated output.
struct SliceParams {
  std::vector<int64_t> start, step, len;
};
StatusOr<SliceParams> ResolveSlice(const Dims& in_dims, const std::vector<int64_t>& starts,
                                   const std::vector<int64_t>& ends, std::vector<int64_t> axes,
                                   std::vector<int64_t> steps);

enum class PadMode { kConstant, kReflect, kEdge, kWrap };  // wrap: opset 19
StatusOr<PadMode> ParsePadMode(const std::string& mode);
// The input coordinate an output coordinate of a padded axis reads from (o - pad_begin mapped
// into [0, d) by the mode); -1 means "the constant" (constant mode, outside the input).
int64_t PadSourceIndex(int64_t o, int64_t pad_begin, int64_t d, PadMode mode);
// Element bytes of a float pad value converted to dtype (opset < 11 'value' attribute).
StatusOr<uint64_t> PadValueBits(float value, DType dtype);

// Gather's indices (int32 or int64) checked against an axis of size d and made non-negative;
// an index outside [-d, d) is an OutOfRange error naming its position.
StatusOr<std::vector<int64_t>> ResolveGatherIndices(const Tensor& indices, int64_t axis, int64_t d);
// That error for index v at `position` (the CUDA Gather's, from its device report, too).
Status GatherIndexOutOfRange(int64_t v, int64_t position, int64_t axis, int64_t d);

// Row-major multi-index of flat position i over n dims (index[d] in [0, dims[d])).
inline void UnravelIndex(int64_t i, const int64_t* dims, int n, int64_t* index) {
  for (int64_t d = n - 1, r = i; d >= 0; --d) {
    index[d] = r % dims[d];
    r /= dims[d];
  }
}

// Element i of an integer (or float) tensor as int64; used for index-like inputs.
int64_t ReadIndexElement(const Tensor& t, int64_t i);

// Sorted, de-duplicated axes in [0, rank); error on an axis out of [-rank, rank) or a repeat.
StatusOr<std::vector<int64_t>> NormalizeAxes(const std::vector<int64_t>& axes, int rank);

// dims viewed as [outer, n, inner] around axis (normalised). coerce_2d (Softmax family before
// opset 13) makes the normalised block everything from axis on: [outer, prod(dims[axis:]), 1].
struct AxisSplit {
  int64_t outer = 1, n = 1, inner = 1;
};
StatusOr<AxisSplit> SplitAtAxis(const Dims& dims, int64_t axis, bool coerce_2d);

}  // namespace whittle
