// Whole-file reads for the data loaders and anything else that loads artifacts, and the size of
// a file. Errors name the path and the OS reason. Writes go through the one atomic writer,
// AtomicFile and WriteFileAtomically (lib/ir/atomic_file.h, included here for them).
#pragma once

#include <cstdint>
#include <string>

#include "lib/ir/atomic_file.h"
#include "lib/ir/status.h"

namespace whittle {

StatusOr<std::string> ReadFileBytes(const std::string& path);

// Size of a file in bytes, -1 if it cannot be stat'ed.
int64_t FileSizeOf(const std::string& path);

}  // namespace whittle
