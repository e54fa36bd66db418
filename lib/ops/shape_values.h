// Data propagation of shape tensors at load time, as ONNX's data propagation and ONNX Runtime's
// symbolic shape inference do: exporters compute reshape targets from the input's own shape
// (Shape -> Gather -> Unsqueeze -> Concat -> Reshape), so without it every dim after such a chain
// is unknown (and passes see "rank unknown"). A shape value (ShapeValue, lib/ops/op_def.h) is the
// elements of a small integer tensor (rank 0 or 1): known numbers, or a symbol ("batch") where
// the number is only known at run time.
#pragma once

#include <optional>
#include <vector>

#include "lib/ir/graph.h"
#include "lib/ops/op_def.h"

namespace whittle {

// Most elements a propagated value may have (shape vectors are short).
constexpr int64_t kMaxShapeValueElements = 64;

// The elements of a constant integer tensor of rank <= 1, or nullopt.
std::optional<ShapeValue> ShapeValueOfTensor(const Tensor& t);

// The shape values of node's outputs from its inputs' (inputs[i]: the value of input i, nullptr
// when absent; in_vals[i]: its shape value or nullptr; out_shapes[k]: output k's inferred shape).
// Handles Shape, Size, Gather, Slice, Concat, Unsqueeze, Squeeze, Cast, Identity, Add, Sub, Mul,
// Div, Neg, Max, Min; other ops give nothing.
std::vector<std::optional<ShapeValue>> PropagateShapeValues(const Node& node, int opset,
                                                            const std::vector<const Value*>& inputs,
                                                            const std::vector<const ShapeValue*>& in_vals,
                                                            const std::vector<std::optional<SymShape>>& out_shapes);

}  // namespace whittle
