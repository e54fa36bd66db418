// File helpers for model I/O (internal to lib/onnx): bounded whole-file reads, reads of a byte
// range of an external-data file that refuse paths escaping the model's folder, and an atomic
// writer (temp file, fsync, rename) so a failed save never leaves a partial file at the target.
// Every failure is a Status naming the file and what went wrong; nothing here throws.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "lib/ir/status.h"
#include "lib/ir/tensor.h"

namespace whittle::onnx_io {

// Protobuf messages (and so ONNX files without external data) cannot exceed this.
constexpr size_t kMaxProtoBytes = 0x7fffffff;

// "dir/a.onnx" -> "dir"; "a.onnx" -> "."; "/a.onnx" -> "/".
std::string DirName(const std::string& path);
// "dir/a.onnx" -> "a.onnx".
std::string BaseName(const std::string& path);

// Reads a regular file of at most max_bytes. NotFound when it does not exist, IoError when it
// cannot be read, InvalidArgument when it is too large or not a regular file.
StatusOr<std::string> ReadWholeFile(const std::string& path, size_t max_bytes);

// Reads `length` bytes at `offset` of the external-data file `location`, resolved under base_dir.
// location must be relative, must not contain a '..' component, and neither it nor any folder on
// the way may be a symlink; the file must be regular and hold the whole range. `what` names the
// tensor in messages. offset/length < 0 mean "absent" (0 and "to the end" respectively);
// expected_bytes is the size the tensor needs, checked against the range.
StatusOr<std::shared_ptr<Buffer>> ReadExternalRange(const std::string& base_dir, const std::string& location,
                                                    int64_t offset, int64_t length, size_t expected_bytes,
                                                    const std::string& what);

// Checks a relative external-data location without touching the file system.
Status CheckExternalLocation(const std::string& location, const std::string& what);

// Writes `<path>.tmp.<pid>.<n>` and renames it over path on Commit(). If Commit() was not reached or
// failed, the destructor removes the temp file, so path is either the old file or the new one.
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(std::string path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  Status Open();
  int fd() const { return fd_; }
  Status Write(const void* data, size_t n);
  Status WriteZeros(size_t n);
  // Flushes to disk and closes; call before Commit().
  Status Sync();
  // Renames the temp file over the target and syncs the folder.
  Status Commit();
  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_path_; }
  // Builds a Status for the last errno, naming the temp file.
  Status ErrnoStatus(const std::string& action) const;

 private:
  std::string path_;
  std::string temp_path_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace whittle::onnx_io
