// The one atomic file writer, for everything Whittle saves (models and their external data,
// arrays, reports, checkpoints): the bytes go to a temporary file beside the target, are flushed
// to disk, and the file is renamed over the target, so a crash leaves the old file or the new one,
// never a torn one. Every live temporary is listed in a fixed table that RemoveLiveTempFiles()
// empties with unlink alone, so a SIGINT/SIGTERM handler can leave no temporary behind.
#pragma once

#include <cstddef>
#include <string>

#include "lib/ir/status.h"

namespace whittle {

// Writes `<dir>/.<name>.tmp-<pid>-<n>` beside `<dir>/<name>` and renames it over the target on
// Commit(). Uncommitted (an error, an early return), the destructor removes the temporary; while
// it lives, RemoveLiveTempFiles() can. Errors name the temporary and the target with the OS reason.
class AtomicFile {
 public:
  explicit AtomicFile(std::string target);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Creates the temporary (never through a symlink planted at its name).
  Status Open();
  int fd() const { return fd_; }
  Status Write(const void* data, size_t n);
  Status WriteZeros(size_t n);
  // Flushes to disk and closes (Commit does it when it was not called).
  Status Sync();
  // Renames the temporary over the target and syncs the folder.
  Status Commit();
  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_path_; }
  // A Status for the last errno: "cannot ACTION '<temp>' (to be renamed to '<target>'): <reason>".
  Status ErrnoStatus(const std::string& action) const;

 private:
  std::string path_, temp_path_;
  int fd_ = -1;
  int slot_ = -1;  // in the table of live temporaries (-1: not listed, its path was too long or the table full)
  bool committed_ = false;
};

// Writes `bytes` to `path` through an AtomicFile.
Status WriteFileAtomically(const std::string& path, const std::string& bytes);

// Unlinks every live AtomicFile's temporary. Async-signal-safe (unlink on fixed buffers only): a
// program's SIGINT/SIGTERM handler calls it before the default action.
void RemoveLiveTempFiles();
// Installs a SIGINT and SIGTERM handler that calls RemoveLiveTempFiles() and then dies of the
// signal as it would have without the handler.
void RemoveTempFilesOnSignal();

}  // namespace whittle
