// NumPy .npz archives (np.savez, np.savez_compressed): a zip file whose members are .npy files.
// Reading goes through the central directory (ZIP64 end records and extra fields included, as
// NumPy writes every member with force_zip64) and accepts stored (method 0) and deflated
// (method 8) members. Everything else is an error naming the file and, where there is one, the
// member: another compression method, encryption, a multi-disk archive, a member whose name does
// not end in ".npy" or repeats another's, a CRC-32 or size that does not match the data, offsets
// or sizes that run past the buffer or make members overlap, an archive with no members, and any
// member that is not a valid .npy file (see npy.h). Sizes are checked before anything is
// allocated, so a hostile archive cannot make the reader allocate much more than deflate's
// 1032:1 ratio allows. Writing produces an uncompressed, plain (non-ZIP64) archive atomically.
#pragma once

#include <string>
#include <vector>

#include "lib/ir/status.h"
#include "lib/ir/tensor.h"

namespace whittle {

struct NpzArray {
  std::string name;  // the member's file name without ".npy" (np.savez's keyword)
  Tensor tensor;
};

// Reads every member, in the archive's (central directory) order.
StatusOr<std::vector<NpzArray>> ReadNpz(const std::string& path);

// Parses archive bytes already in memory; `name` is used in error messages.
StatusOr<std::vector<NpzArray>> ParseNpz(const std::string& bytes, const std::string& name);

// Writes an uncompressed archive (as np.savez does) atomically; names must be unique and non-empty.
// Members are "<name>.npy"; an array whose .npy form, or an archive whose total size, would need
// ZIP64 (4 GiB and up) is an error, as is an empty list (ReadNpz would refuse the result).
Status WriteNpz(const std::string& path, const std::vector<NpzArray>& arrays);

}  // namespace whittle
