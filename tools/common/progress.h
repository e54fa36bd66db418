// Progress display for the command-line tools on stderr. On a terminal one line is rewritten in place
// (\r, throttled); otherwise (a log file, CI) a line is printed when the stage changes, when it
// completes, and at most every few seconds in between, so logs stay short. Disabled = silent.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace whittle::cli {

class Progress {
 public:
  explicit Progress(bool enabled);
  ~Progress() { Clear(); }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // stage: e.g. "[svd] sensitivity"; total <= 0 means no count is shown. detail (e.g. the running
  // loss) follows the count; a change of detail alone does not count as a new stage.
  void Update(const std::string& stage, int64_t done, int64_t total, const std::string& detail = "");
  // A permanent line (after clearing any line being rewritten).
  void Line(const std::string& text);
  // Removes the line being rewritten, if any.
  void Clear();

 private:
  bool enabled_, tty_;
  bool open_ = false;          // a rewritable line is on screen
  bool stage_complete_ = false;
  std::string stage_;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace whittle::cli
