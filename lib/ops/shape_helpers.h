// Small helpers shared by op inference functions: broadcasting, axis normalisation,
// reading int64 tensors (shape/axes inputs) and common checks.
#pragma once

#include <optional>
#include <vector>

#include "lib/ops/op_def.h"

namespace whittle {

// Numpy-style multidirectional broadcast of symbolic shapes. Error when sizes conflict.
StatusOr<SymShape> BroadcastShapes(const SymShape& a, const SymShape& b);
// Broadcast of all present inputs of ctx; nullopt if any input shape is unknown.
StatusOr<std::optional<SymShape>> BroadcastInputs(const InferContext& ctx);
// Normalises axis into [0, rank); error if out of [-rank, rank).
StatusOr<int64_t> NormalizeAxis(int64_t axis, int64_t rank, const std::string& what = "axis");
// Values of an integer (int32/int64) tensor as int64.
std::vector<int64_t> ToInt64Vector(const Tensor& t);
// Element-wise inference: output dtype = input 0's dtype, shape = broadcast of inputs.
Status InferSameAsBroadcast(InferContext& ctx);
// Output 0 has input 0's dtype and shape.
Status InferSameAsInput0(InferContext& ctx);
// The ai.whittle linear ops (BinaryMatMul, CodebookMatMul, BlockCirculantMatMul): their
// out_features n and in_features k must be >= 1; and Y [..., n] from A [..., k] (input 0), float32
// (unknown where A's shape is).
Status CheckLinearFeatures(const Node& node, int64_t n, int64_t k);
Status InferLinearFeaturesOutput(InferContext& ctx, int64_t n, int64_t k);
// Error unless inputs first..last (those present with a known dtype) share X's (input 0's) dtype.
Status CheckInputsMatchX(const InferContext& ctx, int first, int last);

// `rank` unknown dims: the output of Reshape, ConstantOfShape or Expand whose shape input is not
// known but whose length is. That length comes from the model (a hostile one gave 2^32, issue 41's
// fuzzing), so ranks past kMaxInferredRank (NumPy 2's limit; no exporter comes near it) are an error.
constexpr int64_t kMaxInferredRank = 64;
StatusOr<SymShape> UnknownDimsOfRank(const InferContext& ctx, int64_t rank);

}  // namespace whittle
