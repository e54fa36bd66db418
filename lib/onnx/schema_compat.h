// Opset compatibility from the ONNX operator schemas (libonnx's registry), for passes that must
// raise a model's opset (--int8 needs 13 for per-axis quantization). An op's meaning is taken as
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
