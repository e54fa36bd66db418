// Einsum equations (ONNX Einsum, opset 12, numpy semantics): parsing and binding operand shapes to
// subscript labels. It lives in lib/ir because both the op's shape inference (lib/ops/linear.cc)
// and the kernels (kernels/common/linear_shape.h) need it, and kernels may only see lib/ir.
//   "bhqd,bhkd->bhqk"  explicit output;  "ij,jk"  implicit output (the labels that appear once, in
//   ascending character order, after '...' when any operand has one);  "ii->i" a repeated label
//   takes the diagonal;  labels absent from the output are summed over;  "...ij" an ellipsis
//   stands for the leading dims, broadcast numpy-style across operands. Size-1 dims broadcast
//   against a label's size as numpy allows.
#pragma once

#include <string>
#include <vector>

#include "lib/ir/graph.h"
#include "lib/ir/status.h"

namespace whittle {

struct EinsumEquation {
  static constexpr int kEllipsis = -1;
  // Per operand: one entry per subscript, the label's character code or kEllipsis.
  std::vector<std::vector<int>> inputs;
  std::vector<int> output;  // explicit, or the implicit output
  bool explicit_output = false;

  // Errors (InvalidArgument, one line) for characters other than letters, '.', ',', '->' and
  // spaces; a broken or repeated ellipsis; a term count that differs from num_inputs; output labels
  // that are repeated or absent from the inputs.
  static StatusOr<EinsumEquation> Parse(const std::string& equation, int num_inputs);

  // Labels that occur in the inputs, in ascending order.
  std::vector<int> Labels() const;
};

// Operand shapes bound to labels: the size of every label (index = character code) and the
// broadcast ellipsis dims. Checks ranks against the terms and sizes of repeated labels.
struct EinsumDims {
  std::vector<Dim> label;  // 128 entries; unknown for labels that do not occur
  SymShape ellipsis;       // broadcast dims covered by '...' (empty when none)
  SymShape output;         // output shape
};
StatusOr<EinsumDims> BindEinsumDims(const EinsumEquation& eq, const std::vector<SymShape>& shapes);

}  // namespace whittle
