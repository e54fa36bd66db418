// Reference kernels for the indexing ops: Size, GatherElements, Trilu, CumSum, EyeLike, OneHot,
// DepthToSpace, SpaceToDepth, TopK, GatherND, ScatterElements, ScatterND and NonZero (ONNX 1.12, opsets
// 7..17). Plain loops, the truth; every backend uses them until it adds its row to kIndex.
// Outputs arrive preallocated with the dims inference computed; every index read from data is
// range-checked and reported as a Status error (negative indices count from the end where ONNX
// allows it).
#pragma once

#include <cstdint>
#include <string>

#include "kernels/common/index.h"
#include "kernels/common/index_fns.h"
#include "lib/ir/status.h"
#include "lib/ir/tensor.h"

namespace whittle {

Status SizeReference(const Tensor& in, Tensor* out);
Status GatherElementsReference(const Tensor& data, const Tensor& indices, int64_t axis, Tensor* out);
// Keeps elements with j - i >= k (upper) or j - i <= k (lower) of each trailing matrix.
Status TriluReference(const Tensor& in, int64_t k, bool upper, Tensor* out);
Status CumSumReference(const Tensor& in, int64_t axis, bool exclusive, bool reverse, Tensor* out);
// Ones on diagonal k of the 2-D output, zeros elsewhere (output dtype decides the type).
Status EyeLikeReference(int64_t k, Tensor* out);
// values = [off, on]; indices outside [-depth, depth) give an all-off row.
Status OneHotReference(const Tensor& indices, int64_t depth, const Tensor& values, int64_t axis, Tensor* out);
Status DepthToSpaceReference(const Tensor& in, int64_t blocksize, bool crd, Tensor* out);
// crd: opset 28's mode CRD (channel, then block row, then block column), else DCR.
Status SpaceToDepthReference(const Tensor& in, int64_t blocksize, bool crd, Tensor* out);
// Ties keep the lower index first. values/indices dims: input dims with axis = k.
Status TopKReference(const Tensor& in, int64_t axis, bool largest, bool sorted, Tensor* values, Tensor* indices);
Status GatherNDReference(const Tensor& data, const Tensor& indices, int64_t batch_dims, Tensor* out);

StatusOr<ScatterReduction> ParseScatterReduction(const std::string& s);
Status ScatterElementsReference(const Tensor& data, const Tensor& indices, const Tensor& updates, int64_t axis,
                                ScatterReduction red, Tensor* out);
Status ScatterNDReference(const Tensor& data, const Tensor& indices, const Tensor& updates, ScatterReduction red,
                          Tensor* out);
// Row-major indices of the non-zero elements of in: out is int64 [rank, count] (count from
// inference; an error if the data disagree). NaN is non-zero, -0.0 is zero.
Status NonZeroReference(const Tensor& in, Tensor* out);

namespace reference {
extern const IndexFns kIndexFns;
}  // namespace reference

}  // namespace whittle
