// Minimal leveled logging to stderr: "[ember I 12:03:04.123] message".
// The level comes from EMBER_LOG_LEVEL (debug, info, warn, error; default info).
#pragma once

#include <fmt/format.h>

#include <string_view>

namespace ember {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

LogLevel CurrentLogLevel();
void LogMessage(LogLevel level, std::string_view message);
// A tag after "ember" on every line ("[ember r1 I ...]": the rank of a multi-process engine).
// Set once at startup, before other threads log.
void SetLogTag(std::string_view tag);

template <typename... Args>
void Log(LogLevel level, fmt::format_string<Args...> format, Args&&... args) {
  if (level < CurrentLogLevel()) return;
  LogMessage(level, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace ember

#define EMBER_LOG_DEBUG(...) ::ember::Log(::ember::LogLevel::kDebug, __VA_ARGS__)
#define EMBER_LOG_INFO(...) ::ember::Log(::ember::LogLevel::kInfo, __VA_ARGS__)
#define EMBER_LOG_WARN(...) ::ember::Log(::ember::LogLevel::kWarn, __VA_ARGS__)
#define EMBER_LOG_ERROR(...) ::ember::Log(::ember::LogLevel::kError, __VA_ARGS__)
