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

// Live temporary files, for RemoveLiveTempFiles (fixed slots: a signal handler may not allocate).
constexpr int kTempSlots = 16;
constexpr size_t kTempPathMax = 4096;
char g_temp_paths[kTempSlots][kTempPathMax];
std::atomic<bool> g_temp_used[kTempSlots];

int ClaimTempSlot(const std::string& path) {
  if (path.size() >= kTempPathMax) return -1;
  for (int i = 0; i < kTempSlots; ++i) {
    bool expected = false;
    if (g_temp_used[i].compare_exchange_strong(expected, true)) {
      std::memcpy(g_temp_paths[i], path.c_str(), path.size() + 1);
      return i;
    }
  }
  return -1;
}

void ReleaseTempSlot(int slot) {
  if (slot >= 0) g_temp_used[slot].store(false);
}

}  // namespace

TempFile::TempFile(const std::string& target) : target_(target) {
  static std::atomic<unsigned> counter{0};
  const size_t slash = target.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "" : target.substr(0, slash + 1);
  const std::string base = slash == std::string::npos ? target : target.substr(slash + 1);
  path_ = dir + "." + base + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  slot_ = ClaimTempSlot(path_);
}

TempFile::~TempFile() {
  if (!committed_) ::unlink(path_.c_str());
  ReleaseTempSlot(slot_);
}

Status TempFile::Commit() {
  if (::rename(path_.c_str(), target_.c_str()) != 0) return IoError(OsError("cannot rename " + path_ + " to", target_));
  committed_ = true;
  ReleaseTempSlot(slot_);
  slot_ = -1;
  return Status::Ok();
}

void RemoveLiveTempFiles() {
  for (int i = 0; i < kTempSlots; ++i)
    if (g_temp_used[i].load()) ::unlink(g_temp_paths[i]);
}

int64_t FileSizeOf(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : -1;
}

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
  TempFile tmp_file(path);
  const std::string& tmp = tmp_file.path();
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) return IoError(OsError("cannot create", tmp));
  FdCloser closer(fd);
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return IoError(OsError("cannot write", tmp));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) return IoError(OsError("cannot sync", tmp));
  if (!closer.Close()) return IoError(OsError("cannot close", tmp));
  return tmp_file.Commit();
}

}  // namespace whittle
