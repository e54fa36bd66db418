#include "lib/ir/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>

namespace whittle {
namespace {

// The live temporaries, for RemoveLiveTempFiles: fixed slots, because a signal handler may not
// allocate. A slot is kFree, kFilling while its path is copied in (the handler skips it), or kLive.
constexpr int kTempSlots = 64;
constexpr size_t kTempPathMax = 4096;
enum SlotState : int { kFree = 0, kFilling = 1, kLive = 2 };
char g_temp_paths[kTempSlots][kTempPathMax];
std::atomic<int> g_temp_state[kTempSlots];

int ClaimTempSlot(const std::string& path) {
  if (path.size() >= kTempPathMax) return -1;
  for (int i = 0; i < kTempSlots; ++i) {
    int expected = kFree;
    if (g_temp_state[i].compare_exchange_strong(expected, kFilling)) {
      std::memcpy(g_temp_paths[i], path.c_str(), path.size() + 1);
      g_temp_state[i].store(kLive);
      return i;
    }
  }
  return -1;
}

void ReleaseTempSlot(int slot) {
  if (slot >= 0) g_temp_state[slot].store(kFree);
}

std::string DirOf(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

void OnSignal(int sig) {
  RemoveLiveTempFiles();
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

}  // namespace

AtomicFile::AtomicFile(std::string target) : path_(std::move(target)) {
  // pid plus a per-process counter: two threads saving the same path never share a temporary.
  static std::atomic<unsigned> counter{0};
  const size_t slash = path_.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "" : path_.substr(0, slash + 1);
  const std::string base = slash == std::string::npos ? path_ : path_.substr(slash + 1);
  temp_path_ = dir + "." + base + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  slot_ = ClaimTempSlot(temp_path_);
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temp_path_.c_str());
  ReleaseTempSlot(slot_);
}

Status AtomicFile::ErrnoStatus(const std::string& action) const {
  return IoError("cannot " + action + " '" + temp_path_ + "' (to be renamed to '" + path_ + "'): " +
                 std::strerror(errno));
}

Status AtomicFile::Open() {
  // A stale temporary of a crashed run with the same pid is ours to replace; O_EXCL then makes
  // sure we never write through a symlink planted at the temporary's name.
  ::unlink(temp_path_.c_str());
  fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd_ < 0) return ErrnoStatus("create");
  return Status::Ok();
}

Status AtomicFile::Write(const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd_, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("write");
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return Status::Ok();
}

Status AtomicFile::WriteZeros(size_t n) {
  static const char kZeros[64] = {};
  while (n > 0) {
    const size_t k = n < sizeof(kZeros) ? n : sizeof(kZeros);
    WH_RETURN_IF_ERROR(Write(kZeros, k));
    n -= k;
  }
  return Status::Ok();
}

Status AtomicFile::Sync() {
  if (::fsync(fd_) != 0) return ErrnoStatus("sync");
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) return ErrnoStatus("close");
  return Status::Ok();
}

Status AtomicFile::Commit() {
  if (fd_ >= 0) WH_RETURN_IF_ERROR(Sync());
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) return ErrnoStatus("rename");
  committed_ = true;
  ReleaseTempSlot(slot_);
  slot_ = -1;
  // Make the rename itself durable; failure here does not undo the save, so it is not an error.
  const int dfd = ::open(DirOf(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return Status::Ok();
}

Status WriteFileAtomically(const std::string& path, const std::string& bytes) {
  AtomicFile f(path);
  WH_RETURN_IF_ERROR(f.Open());
  WH_RETURN_IF_ERROR(f.Write(bytes.data(), bytes.size()));
  return f.Commit();
}

void RemoveLiveTempFiles() {
  for (int i = 0; i < kTempSlots; ++i)
    if (g_temp_state[i].load() == kLive) ::unlink(g_temp_paths[i]);
}

void RemoveTempFilesOnSignal() {
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
}

}  // namespace whittle
