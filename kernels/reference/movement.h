// Reference kernels for the data-movement ops (Transpose, Concat, Split, Slice, Gather, Expand,
// Pad, Tile, Range): plain per-element loops, the truth the fast CPU kernels are tested against.
// These ops only move bytes, so they work on every dtype by element size (1, 2, 4, 8 bytes).
// Outputs arrive preallocated with the dims inference computed; the index inputs arrive resolved
// by the kernels/common/index.h helpers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/common/index.h"
#include "kernels/common/movement_fns.h"
#include "lib/ir/status.h"
#include "lib/ir/tensor.h"

namespace whittle {

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

namespace reference {
extern const MovementFns kMovementFns;
}  // namespace reference

}  // namespace whittle
