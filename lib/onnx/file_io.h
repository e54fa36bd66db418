// File helpers for model I/O (internal to lib/onnx): bounded whole-file reads and reads of a byte
// range of an external-data file that refuse paths escaping the model's folder. Saves go through
// the one atomic writer, AtomicFile (lib/ir/atomic_file.h). Every failure is a Status naming the
// file and what went wrong; nothing here throws.
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

}  // namespace whittle::onnx_io
