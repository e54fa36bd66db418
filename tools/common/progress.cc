#include "tools/common/progress.h"

#include <unistd.h>

#include <cstdio>

namespace whittle::cli {

Progress::Progress(bool enabled) : enabled_(enabled), tty_(enabled && ::isatty(STDERR_FILENO) == 1) {}

void Progress::Update(const std::string& stage, int64_t done, int64_t total, const std::string& detail) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  const bool complete = total > 0 && done >= total;
  const bool same = stage == stage_;
  std::string text = stage;
  if (total > 0) text += " " + std::to_string(done) + "/" + std::to_string(total);
  if (!detail.empty()) text += " " + detail;
  if (tty_) {
    if (same && !complete && now - last_ < std::chrono::milliseconds(100)) return;
    std::fprintf(stderr, "\r%s\033[K", text.c_str());
    std::fflush(stderr);
    open_ = true;
  } else {
    if (same && (complete ? stage_complete_ : now - last_ < std::chrono::seconds(5))) return;
    std::fprintf(stderr, "%s\n", text.c_str());
  }
  stage_complete_ = complete;
  stage_ = stage;
  last_ = now;
}

void Progress::Line(const std::string& text) {
  if (!enabled_) return;
  Clear();
  std::fprintf(stderr, "%s\n", text.c_str());
}

void Progress::Clear() {
  if (!open_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  open_ = false;
  stage_.clear();
}

}  // namespace whittle::cli
