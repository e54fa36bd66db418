// Opset compatibility from the ONNX operator schemas, for loading models of newer opsets than an
// op's implementation was written for, and for passes that must raise a model's opset (--int8
// needs 13 for per-axis quantization). The schema history up to opset 28 is a table generated
// from the onnx package (lib/ops/op_history.inc, scripts/gen_onnx_op_history.py): Debian's
// libonnx 1.12 only knows opsets up to 17. An op's meaning is taken as
// unchanged between two opsets when every schema version step in between only widened the type
// constraints, appended optional inputs or outputs, made a required input optional, or added
// optional attributes — the compatible changes in ONNX's versioning rules. A renamed, removed,
// moved or re-typed input/attribute, or a changed attribute default (Softmax's axis at 13), is a
// change, and the answer names the step and what changed.
#pragma once

#include <cstdint>
#include <string>

namespace whittle {

// True when op (domain ai.onnx) means the same at opset `to` as at `from` (from <= to); else
// false with *why, e.g. "Softmax 11 -> 13: attribute 'axis' changed its default".
bool OpUnchangedBetween(const std::string& op, int64_t from, int64_t to, std::string* why);


}  // namespace whittle
