// Reference kernels for the indexing ops: Size, GatherElements, Trilu, CumSum, EyeLike, OneHot,
// DepthToSpace, SpaceToDepth, TopK, GatherND, ScatterElements and ScatterND (ONNX 1.12, opsets
// 7..17). Plain loops, the truth; the CPU provider registers these same kernels. Outputs arrive
// preallocated with the dims inference computed; every index read from data is range-checked
// and reported as a Status error (negative indices count from the end where ONNX allows it).
#pragma once

#include <cstdint>
#include <string>

#include "lib/ir/status.h"
#include "lib/ir/tensor.h"

namespace whittle {

// Calls fn(T{}) with T the C++ type of an arithmetic dtype (no float16); error otherwise.
template <class Fn>
Status DispatchArithmetic(DType dt, Fn&& fn) {
  switch (dt) {
    case DType::kFloat32:
      return fn(float{});
    case DType::kFloat64:
      return fn(double{});
    case DType::kInt8:
      return fn(int8_t{});
    case DType::kUInt8:
      return fn(uint8_t{});
    case DType::kInt16:
      return fn(int16_t{});
    case DType::kUInt16:
      return fn(uint16_t{});
    case DType::kInt32:
      return fn(int32_t{});
    case DType::kUInt32:
      return fn(uint32_t{});
    case DType::kInt64:
      return fn(int64_t{});
    case DType::kUInt64:
      return fn(uint64_t{});
    default:
      return Unimplemented(std::string("unsupported element type ") + DTypeName(dt));
  }
}

// Element i of an integer (or float) tensor as int64; used for index-like inputs.
int64_t ReadIndexElement(const Tensor& t, int64_t i);

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
Status SpaceToDepthReference(const Tensor& in, int64_t blocksize, Tensor* out);
// Ties keep the lower index first. values/indices dims: input dims with axis = k.
Status TopKReference(const Tensor& in, int64_t axis, bool largest, bool sorted, Tensor* values, Tensor* indices);
Status GatherNDReference(const Tensor& data, const Tensor& indices, int64_t batch_dims, Tensor* out);

enum class ScatterReduction { kNone, kAdd, kMul };
StatusOr<ScatterReduction> ParseScatterReduction(const std::string& s);
Status ScatterElementsReference(const Tensor& data, const Tensor& indices, const Tensor& updates, int64_t axis,
                                ScatterReduction red, Tensor* out);
Status ScatterNDReference(const Tensor& data, const Tensor& indices, const Tensor& updates, ScatterReduction red,
                          Tensor* out);

}  // namespace whittle
