// IDX files (the MNIST family's format): a 4-byte magic 00 00 TYPE NDIMS, NDIMS big-endian
// uint32 dims, then the elements big-endian in C order. Files may be gzip-compressed (detected
// by the 1f 8b magic, not the name). The payload must hold exactly the promised elements: a
// truncated file or trailing bytes are errors naming the file. Element types map to uint8, int8,
// int16, int32, float32 and float64 tensors.
#pragma once

#include <string>

#include "lib/ir/status.h"
#include "lib/ir/tensor.h"

namespace whittle {

StatusOr<Tensor> ReadIdx(const std::string& path);

// Parses uncompressed IDX bytes already in memory; `name` is used in error messages.
StatusOr<Tensor> ParseIdx(const std::string& bytes, const std::string& name);

}  // namespace whittle
