// Whole-file reads and atomic writes for the data loaders and anything else that saves
// artifacts (arrays, reports). Errors name the path and the OS reason. An atomic write goes to a
// temporary file in the target's directory, is flushed to disk, then renamed over the target, so
// a crash leaves either the old file or the new one, never a torn one.
#pragma once

#include <string>

#include "lib/ir/status.h"

namespace whittle {

StatusOr<std::string> ReadFileBytes(const std::string& path);
Status WriteFileAtomically(const std::string& path, const std::string& bytes);

}  // namespace whittle
