// Status and Expected<T>: how errors cross I/O and API edges in ember.
//
// Hot paths never throw; anything that reads a file, parses user input or answers a request
// returns a Status (or an Expected<T>) whose message says what went wrong and what to do.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace ember {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,   // the caller gave something malformed or inconsistent
  kNotFound,          // a file, tensor or key that should exist does not
  kDataLoss,          // a file is truncated or its contents contradict its header
  kIoError,           // the operating system refused (open, mmap, read)
  kUnimplemented,     // well-formed, but ember does not support it yet
  kOutOfRange,        // a value outside what the model or engine allows
  kResourceExhausted, // out of memory, KV blocks or queue slots
  kInternal,          // a bug in ember
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "INVALID_ARGUMENT: message", or "OK".
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status DataLoss(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
inline Status IoError(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
inline Status Unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
inline Status OutOfRange(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
inline Status ResourceExhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

// A value or the Status explaining why there is none.
template <typename T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : storage_(std::move(value)) {}  // NOLINT: implicit by design
  Expected(Status status) : storage_(std::move(status)) {}  // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(storage_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(storage_);
  }
  T& value() & { return std::get<T>(storage_); }
  const T& value() const& { return std::get<T>(storage_); }
  T&& value() && { return std::get<T>(std::move(storage_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> storage_;
};

}  // namespace ember

#define EMBER_CONCAT_INNER_(a, b) a##b
#define EMBER_CONCAT_(a, b) EMBER_CONCAT_INNER_(a, b)

// Returns the Status from the enclosing function if `expr` is not OK.
#define EMBER_RETURN_IF_ERROR(expr)                   \
  do {                                                \
    ::ember::Status ember_status_ = (expr);           \
    if (!ember_status_.ok()) return ember_status_;    \
  } while (0)

// `lhs = value of expr`, or return its Status from the enclosing function.
#define EMBER_ASSIGN_OR_RETURN(lhs, expr) \
  EMBER_ASSIGN_OR_RETURN_IMPL_(EMBER_CONCAT_(ember_expected_, __LINE__), lhs, expr)
#define EMBER_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()
