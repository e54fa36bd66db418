// NumPy .npy files: how datasets, calibration inputs and reference logits move between Python
// and Whittle. Reads format versions 1.0, 2.0 and 3.0 with little-endian (or byte-order-free)
// numeric and bool dtypes in C order; anything else (big-endian, Fortran order, object arrays,
// a header that does not parse, a payload that is not exactly what the header promises) is an
// error naming the file. Writes version 1.0 (2.0 for huge headers) atomically.
#pragma once

#include <string>

#include "lib/ir/status.h"
#include "lib/ir/tensor.h"

namespace whittle {

// Reads a .npy file into a new tensor of the matching dtype.
StatusOr<Tensor> ReadNpy(const std::string& path);

// Parses .npy bytes already in memory; `name` is used in error messages.
StatusOr<Tensor> ParseNpy(const std::string& bytes, const std::string& name);

// Serializes a tensor to .npy bytes (fails for dtypes NumPy cannot name, e.g. bfloat16).
StatusOr<std::string> SerializeNpy(const Tensor& t);

// Writes t to path through a temporary file in the same directory and a rename, so readers
// never observe a half-written file.
Status WriteNpy(const std::string& path, const Tensor& t);

}  // namespace whittle
