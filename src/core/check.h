// CHECK for invariants: a failed check is a bug in ember, so it reports file, line and the
// condition, then aborts. Never use it for bad input; return a Status instead.
#pragma once

#include <fmt/format.h>

#include <string>
#include <utility>

namespace ember::internal {
[[noreturn]] void CheckFailed(const char* file, int line, const char* condition, const std::string& message);

// The optional message of a check: none, or a format string (checked at compile time) and its
// arguments.
inline std::string CheckMessage() { return {}; }
template <typename... Args>
std::string CheckMessage(fmt::format_string<Args...> format, Args&&... args) {
  return fmt::format(format, std::forward<Args>(args)...);
}
}  // namespace ember::internal

// EMBER_CHECK(cond) or EMBER_CHECK(cond, "fmt {}", args...).
#define EMBER_CHECK(cond, ...)                                                                              \
  do {                                                                                                      \
    if (__builtin_expect(!(cond), 0)) {                                                                     \
      ::ember::internal::CheckFailed(__FILE__, __LINE__, #cond, ::ember::internal::CheckMessage(__VA_ARGS__)); \
    }                                                                                                       \
  } while (0)

#ifdef NDEBUG
#define EMBER_DCHECK(cond, ...) \
  do {                          \
  } while (0)
#else
#define EMBER_DCHECK(cond, ...) EMBER_CHECK(cond __VA_OPT__(, ) __VA_ARGS__)
#endif
