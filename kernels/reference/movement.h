// Reference kernels for the data-movement ops (Transpose, Concat, Split, Slice, Gather, Expand,
// Pad, Tile, Range): plain per-element loops, the truth the fast CPU kernels are tested against.
// These ops only move bytes, so they work on every dtype by element size (1, 2, 4, 8 bytes).
// Outputs arrive preallocated with the dims inference computed; the Resolve* helpers turn
// attributes/index inputs into per-axis parameters and are shared with the CPU kernels.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lib/ir/status.h"
#include "lib/ir/tensor.h"

namespace whittle {

// Calls fn(E{}) with E an unsigned integer type of the given element size; error otherwise.
template <class Fn>
Status DispatchByElementSize(size_t size, Fn&& fn) {
  switch (size) {
    case 1: return fn(uint8_t{});
    case 2: return fn(uint16_t{});
    case 4: return fn(uint32_t{});
    case 8: return fn(uint64_t{});
    default: return Internal("unsupported element size " + std::to_string(size));
  }
}

// Row-major strides (in elements) of dims.
std::vector<int64_t> StridesOf(const Dims& dims);
// Advances a row-major multi-index over dims; false once it wraps around.
bool NextIndex(std::vector<int64_t>& idx, const Dims& dims);

// perm attribute (empty = reverse) validated against rank.
StatusOr<std::vector<int64_t>> ResolvePerm(const std::vector<int64_t>& perm, int rank);

// Per-axis first input index and step of a slice, for every axis of the input (unsliced axes:
// start 0, step 1). len is the output size, which must match the preallocated output.
struct SliceParams {
  std::vector<int64_t> start, step, len;
};
StatusOr<SliceParams> ResolveSlice(const Dims& in_dims, const std::vector<int64_t>& starts,
                                   const std::vector<int64_t>& ends, std::vector<int64_t> axes,
                                   std::vector<int64_t> steps);

enum class PadMode { kConstant, kReflect, kEdge };
StatusOr<PadMode> ParsePadMode(const std::string& mode);
// The input coordinate an output coordinate of a padded axis reads from (o - pad_begin mapped
// into [0, d) by the mode); -1 means "the constant" (constant mode, outside the input).
int64_t PadSourceIndex(int64_t o, int64_t pad_begin, int64_t d, PadMode mode);
// Element bytes of a float pad value converted to dtype (opset < 11 'value' attribute).
StatusOr<uint64_t> PadValueBits(float value, DType dtype);

Status TransposeReference(const Tensor& in, const std::vector<int64_t>& perm, Tensor* out);
Status ConcatReference(const std::vector<const Tensor*>& ins, int64_t axis, Tensor* out);
Status SplitReference(const Tensor& in, int64_t axis, const std::vector<Tensor*>& outs);
Status SliceReference(const Tensor& in, const SliceParams& p, Tensor* out);
// Indices may be negative (counted from the end); out-of-range indices are an error.
Status GatherReference(const Tensor& data, const Tensor& indices, int64_t axis, Tensor* out);
// Broadcasts in to out's dims (numpy rules; out's dims come from inference).
Status ExpandReference(const Tensor& in, Tensor* out);
// pads: [begin_0..begin_{r-1}, end_0..end_{r-1}]; value_bits: the constant's element bytes.
Status PadReference(const Tensor& in, const std::vector<int64_t>& pads, PadMode mode, uint64_t value_bits,
                    Tensor* out);
// Repeats are implied by out dims / in dims.
Status TileReference(const Tensor& in, Tensor* out);
// out[i] = start + i * delta for scalar start/delta of out's dtype.
Status RangeReference(const Tensor& start, const Tensor& delta, Tensor* out);

}  // namespace whittle
