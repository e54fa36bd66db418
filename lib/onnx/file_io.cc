#include "lib/onnx/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "lib/ir/fd.h"

namespace whittle::onnx_io {
namespace {

std::string ErrnoText(int err) { return std::strerror(err); }

// Reads exactly n bytes at offset (pread loop: short reads are normal for large ranges).
bool PreadAll(int fd, char* dst, size_t n, int64_t offset) {
  while (n > 0) {
    const size_t chunk = n < (size_t{1} << 30) ? n : (size_t{1} << 30);
    ssize_t r = ::pread(fd, dst, chunk, static_cast<off_t>(offset));
    if (r < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (r == 0) {
      errno = EIO;  // the file shrank under us
      return false;
    }
    dst += r;
    n -= static_cast<size_t>(r);
    offset += r;
  }
  return true;
}

std::vector<std::string> SplitPath(const std::string& p) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= p.size()) {
    size_t slash = p.find('/', start);
    if (slash == std::string::npos) slash = p.size();
    if (slash > start) parts.push_back(p.substr(start, slash - start));
    start = slash + 1;
  }
  return parts;
}

}  // namespace

std::string DirName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string BaseName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

StatusOr<std::string> ReadWholeFile(const std::string& path, size_t max_bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return NotFound("file '" + path + "' does not exist");
    return IoError("cannot open '" + path + "': " + ErrnoText(err));
  }
  FdCloser closer(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) return IoError("cannot stat '" + path + "': " + ErrnoText(errno));
  if (!S_ISREG(st.st_mode)) return InvalidArgument("'" + path + "' is not a regular file");
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size > max_bytes)
    return InvalidArgument("'" + path + "' has " + std::to_string(size) + " bytes, more than the " +
                           std::to_string(max_bytes) + " a protobuf message can hold (store large tensors as external data)");
  std::string bytes(static_cast<size_t>(size), '\0');
  if (!PreadAll(fd, bytes.data(), bytes.size(), 0))
    return IoError("cannot read '" + path + "': " + ErrnoText(errno));
  return bytes;
}

Status CheckExternalLocation(const std::string& location, const std::string& what) {
  if (location.empty()) return InvalidArgument(what + ": external data has an empty 'location'");
  if (location.find('\0') != std::string::npos)
    return InvalidArgument(what + ": external data location contains a NUL character");
  if (location[0] == '/')
    return InvalidArgument(what + ": external data location '" + location +
                           "' is an absolute path; it must be relative to the model's folder");
  for (const std::string& part : SplitPath(location))
    if (part == "..")
      return InvalidArgument(what + ": external data location '" + location +
                             "' contains '..'; it must stay inside the model's folder");
  return Status::Ok();
}

namespace {

constexpr size_t kMapMinBytes = size_t{1} << 20;  // smaller tensors are read

bool MappingEnabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("WHITTLE_MMAP");
    return !(v && std::string(v) == "0");
  }();
  return enabled;
}

}  // namespace

StatusOr<std::shared_ptr<Buffer>> ReadExternalRange(const std::string& base_dir, const std::string& location,
                                                    int64_t offset, int64_t length, size_t expected_bytes,
                                                    const std::string& what) {
  WH_RETURN_IF_ERROR(CheckExternalLocation(location, what));
  if (base_dir.empty())
    return InvalidArgument(what + ": external data '" + location +
                           "' cannot be resolved because the model's folder is unknown");
  // Walk each component with lstat so that neither the file nor a folder leading to it can be a
  // symlink pointing outside the model's folder.
  const std::vector<std::string> parts = SplitPath(location);
  std::string full = base_dir;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i] == ".") continue;
    full += "/" + parts[i];
    struct stat st {};
    if (::lstat(full.c_str(), &st) != 0) {
      const int err = errno;
      if (err == ENOENT) return NotFound(what + ": external data file '" + full + "' does not exist");
      return IoError(what + ": cannot stat external data file '" + full + "': " + ErrnoText(err));
    }
    if (S_ISLNK(st.st_mode))
      return InvalidArgument(what + ": external data path '" + full + "' is a symlink; symlinks are refused");
    const bool last = i + 1 == parts.size();
    if (!last && !S_ISDIR(st.st_mode))
      return InvalidArgument(what + ": '" + full + "' in external data location '" + location + "' is not a folder");
    if (last && !S_ISREG(st.st_mode))
      return InvalidArgument(what + ": external data file '" + full + "' is not a regular file");
  }
  int fd = ::open(full.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return IoError(what + ": cannot open external data file '" + full + "': " + ErrnoText(errno));
  FdCloser closer(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
    return InvalidArgument(what + ": external data file '" + full + "' is not a regular file");
  const int64_t file_size = static_cast<int64_t>(st.st_size);
  if (offset < 0) offset = 0;
  if (offset > file_size)
    return InvalidArgument(what + ": external data offset " + std::to_string(offset) + " is past the end of '" +
                           full + "' (" + std::to_string(file_size) + " bytes)");
  if (length < 0) length = file_size - offset;
  if (static_cast<uint64_t>(length) != expected_bytes)
    return InvalidArgument(what + ": external data length is " + std::to_string(length) + " bytes, expected " +
                           std::to_string(expected_bytes) + " (element count times element size)");
  if (length > file_size - offset)
    return InvalidArgument(what + ": external data range [" + std::to_string(offset) + ", " +
                           std::to_string(offset) + "+" + std::to_string(length) + ") is past the end of '" + full +
                           "' (" + std::to_string(file_size) + " bytes)");
  // Large aligned ranges are mapped, not read: a gigabyte model's weights then cost page cache
  // (given back with Buffer::ReleaseResidentPages once consumed), not a private copy.
  // WHITTLE_MMAP=0 reads them instead.
  if (expected_bytes >= kMapMinBytes && offset % 64 == 0 && MappingEnabled()) {
    auto mapped = Buffer::MapFile(fd, static_cast<uint64_t>(offset), expected_bytes);
    if (mapped.ok()) return mapped;
  }
  // Allocation is bounded by the file's real size, checked above.
  std::shared_ptr<Buffer> buf = Buffer::Allocate(expected_bytes);
  if (!PreadAll(fd, static_cast<char*>(buf->data()), expected_bytes, offset))
    return IoError(what + ": cannot read external data file '" + full + "': " + ErrnoText(errno));
  return buf;
}

}  // namespace whittle::onnx_io
