// Errors are values: every fallible call returns Status or Result<T> with a
// one-line message that names what was wrong (file, tensor, field).
#pragma once
#include <fmt/format.h>

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace deltafin {

class Status {
 public:
  Status() = default;
  static Status error(std::string message) { return Status(std::move(message)); }
  // A stop that was asked for (a client left, a shutdown): not a failure.
  static Status cancelled() {
    Status s("cancelled");
    s.cancelled_ = true;
    return s;
  }
  bool ok() const { return !message_.has_value(); }
  bool is_cancelled() const { return cancelled_; }
  const std::string& message() const {
    static const std::string kEmpty;
    return message_ ? *message_ : kEmpty;
  }
  // Prefix context ("while reading X: ") to an error; a no-op on success.
  Status with_context(const std::string& context) const {
    if (ok()) return *this;
    Status s(context + ": " + *message_);
    s.cancelled_ = cancelled_;
    return s;
  }

 private:
  explicit Status(std::string m) : message_(std::move(m)) {}
  std::optional<std::string> message_;
  bool cancelled_ = false;
};

template <typename... Args>
Status error(fmt::format_string<Args...> f, Args&&... args) {
  return Status::error(fmt::format(f, std::forward<Args>(args)...));
}

template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}  // NOLINT: must be an error
  bool ok() const { return std::holds_alternative<T>(v_); }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  Status status() const { return ok() ? Status() : std::get<Status>(v_); }
  const std::string& message() const {
    static const std::string kEmpty;
    return ok() ? kEmpty : std::get<Status>(v_).message();
  }

 private:
  std::variant<T, Status> v_;
};

}  // namespace deltafin

#define DF_CONCAT_INNER(a, b) a##b
#define DF_CONCAT(a, b) DF_CONCAT_INNER(a, b)

// Return early with the error of a Status-returning expression.
#define DF_TRY(expr)                                  \
  do {                                                \
    ::deltafin::Status df_status_ = (expr);           \
    if (!df_status_.ok()) return df_status_;          \
  } while (0)

// `DF_ASSIGN(auto x, f());` assigns the value of a Result or returns its error.
#define DF_ASSIGN(lhs, expr) DF_ASSIGN_IMPL(DF_CONCAT(df_result_, __LINE__), lhs, expr)
#define DF_ASSIGN_IMPL(tmp, lhs, expr)           \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp).value()
