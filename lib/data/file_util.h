// Whole-file reads and atomic writes for the data loaders and anything else that saves
// artifacts (arrays, reports). Errors name the path and the OS reason. An atomic write goes to a
// temporary file in the target's directory, is flushed to disk, then renamed over the target, so
// a crash leaves either the old file or the new one, never a torn one.
#pragma once

#include <cstdint>
#include <string>

#include "lib/ir/status.h"

namespace whittle {

StatusOr<std::string> ReadFileBytes(const std::string& path);
Status WriteFileAtomically(const std::string& path, const std::string& bytes);

// A temporary file beside `target` (same directory, so the rename is atomic) that is removed when
// the object goes away unless Commit() renamed it over the target. Live temporary files are also
// listed for RemoveLiveTempFiles(), so a program's signal handler can remove them on Ctrl-C.
class TempFile {
 public:
  explicit TempFile(const std::string& target);
  ~TempFile();
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  const std::string& path() const { return path_; }
  // Renames the temporary file over the target.
  Status Commit();

 private:
  std::string target_, path_;
  int slot_ = -1;
  bool committed_ = false;
};

// Unlinks every live TempFile; async-signal-safe (only unlink on fixed buffers).
void RemoveLiveTempFiles();

// Size of a file in bytes, -1 if it cannot be stat'ed.
int64_t FileSizeOf(const std::string& path);

}  // namespace whittle
