// Status and StatusOr: how every Whittle function that touches model bytes, user flags or data
// files reports failure (public API; internal code includes it through lib/ir/status.h). The
// message names the file, node, op and what was expected. No exception crosses a library
// boundary; WH_CHECK aborts only on broken internal invariants.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <variant>

namespace whittle {

// kResourceExhausted: a memory budget or the machine's memory (a tensor too large to hold).
// kDeadlineExceeded: a run's time budget (SessionOptions::max_run_ms) passed before it finished.
enum class StatusCode {
  kOk = 0,
  kInvalidArgument,
  kNotFound,
  kUnimplemented,
  kOutOfRange,
  kIoError,
  kInternal,
  kResourceExhausted,
  kDeadlineExceeded
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // Prefixes context ("loading model.onnx: node 'conv1' (Conv): ...").
  Status WithContext(const std::string& context) const {
    if (ok()) return *this;
    return Status(code_, context + ": " + message_);
  }
  std::string ToString() const { return ok() ? std::string("OK") : message_; }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return Status(StatusCode::kInvalidArgument, std::move(m)); }
inline Status NotFound(std::string m) { return Status(StatusCode::kNotFound, std::move(m)); }
inline Status Unimplemented(std::string m) { return Status(StatusCode::kUnimplemented, std::move(m)); }
inline Status OutOfRange(std::string m) { return Status(StatusCode::kOutOfRange, std::move(m)); }
inline Status IoError(std::string m) { return Status(StatusCode::kIoError, std::move(m)); }
inline Status Internal(std::string m) { return Status(StatusCode::kInternal, std::move(m)); }
inline Status ResourceExhausted(std::string m) { return Status(StatusCode::kResourceExhausted, std::move(m)); }
inline Status DeadlineExceeded(std::string m) { return Status(StatusCode::kDeadlineExceeded, std::move(m)); }

template <class T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status s) : v_(std::move(s)) {  // NOLINT: implicit by design
    if (std::get<Status>(v_).ok()) v_ = Status(StatusCode::kInternal, "StatusOr constructed from OK status");
  }
  StatusOr(T value) : v_(std::move(value)) {}  // NOLINT
  bool ok() const { return std::holds_alternative<T>(v_); }
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(v_); }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &std::get<T>(v_); }
  const T* operator->() const { return &std::get<T>(v_); }
  T& operator*() & { return std::get<T>(v_); }
  const T& operator*() const& { return std::get<T>(v_); }

 private:
  std::variant<Status, T> v_;
};

[[noreturn]] inline void CheckFailed(const char* file, int line, const char* cond) {
  std::fprintf(stderr, "whittle: internal invariant failed at %s:%d: %s\n", file, line, cond);
  std::abort();
}

}  // namespace whittle

#define WH_CONCAT_INNER(a, b) a##b
#define WH_CONCAT(a, b) WH_CONCAT_INNER(a, b)

#define WH_RETURN_IF_ERROR(expr)              \
  do {                                        \
    ::whittle::Status _wh_st = (expr);        \
    if (!_wh_st.ok()) return _wh_st;          \
  } while (0)

#define WH_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp).value()

#define WH_ASSIGN_OR_RETURN(lhs, expr) WH_ASSIGN_OR_RETURN_IMPL(WH_CONCAT(_wh_so_, __LINE__), lhs, expr)

// Internal invariants only; never for bad input.
#define WH_CHECK(cond) \
  do {                 \
    if (!(cond)) ::whittle::CheckFailed(__FILE__, __LINE__, #cond); \
  } while (0)
