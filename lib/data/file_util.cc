#include "lib/data/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "lib/ir/fd.h"

namespace whittle {
namespace {

std::string OsError(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + std::strerror(errno);
}

}  // namespace

StatusOr<std::string> ReadFileBytes(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return NotFound(OsError("cannot open", path));
    return IoError(OsError("cannot open", path));
  }
  FdCloser closer(fd);
  struct stat st;
  if (::fstat(fd, &st) != 0) return IoError(OsError("cannot stat", path));
  if (S_ISDIR(st.st_mode)) return InvalidArgument(path + " is a directory, expected a file");
  std::string bytes;
  if (st.st_size > 0) bytes.reserve(static_cast<size_t>(st.st_size));
  char chunk[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd, chunk, sizeof(chunk));
    if (n < 0) {
      if (errno == EINTR) continue;
      return IoError(OsError("cannot read", path));
    }
    if (n == 0) break;
    bytes.append(chunk, static_cast<size_t>(n));
  }
  return bytes;
}

Status WriteFileAtomically(const std::string& path, const std::string& bytes) {
  static std::atomic<unsigned> counter{0};
  const std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) return IoError(OsError("cannot create", tmp));
  FdCloser closer(fd);
  auto fail = [&](const std::string& what) {
    Status st = IoError(OsError(what, tmp));
    closer.Close();
    ::unlink(tmp.c_str());
    return st;
  };
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail("cannot write");
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) return fail("cannot sync");
  if (!closer.Close()) {
    Status st = IoError(OsError("cannot close", tmp));
    ::unlink(tmp.c_str());
    return st;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    Status st = IoError(OsError("cannot rename " + tmp + " to", path));
    ::unlink(tmp.c_str());
    return st;
  }
  return Status::Ok();
}

}  // namespace whittle
