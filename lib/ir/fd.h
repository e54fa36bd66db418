// FdCloser: closes a POSIX file descriptor on every path out of a scope (RAII). Close() closes
// early and reports whether the close (which may flush) succeeded. Shared by lib/data's and
// lib/onnx's file readers and writers.
#pragma once

#include <unistd.h>

namespace whittle {

class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() {
    if (fd_ >= 0) ::close(fd_);
  }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;
  // Closes now and reports whether the close (which may flush) succeeded.
  bool Close() {
    const int fd = fd_;
    fd_ = -1;
    return ::close(fd) == 0;
  }

 private:
  int fd_;
};

}  // namespace whittle
