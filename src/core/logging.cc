#include "core/logging.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <string>

namespace ember {
namespace {

LogLevel LevelFromEnvironment() {
  const char* value = std::getenv("EMBER_LOG_LEVEL");
  if (value == nullptr) return LogLevel::kInfo;
  if (std::strcmp(value, "debug") == 0) return LogLevel::kDebug;
  if (std::strcmp(value, "warn") == 0) return LogLevel::kWarn;
  if (std::strcmp(value, "error") == 0) return LogLevel::kError;
  return LogLevel::kInfo;
}

}  // namespace

LogLevel CurrentLogLevel() {
  // EMBER_LOG_LEVEL fixes the level for the whole process, so it is read once.
  static const LogLevel level = LevelFromEnvironment();
  return level;
}

namespace {
std::string& LogTag() {
  static std::string tag;
  return tag;
}
}  // namespace

void SetLogTag(std::string_view tag) { LogTag() = tag.empty() ? std::string() : std::string(tag) + " "; }

void LogMessage(LogLevel level, std::string_view message) {
  static std::mutex mutex;
  static constexpr char kLetters[] = {'D', 'I', 'W', 'E'};
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const int millis = static_cast<int>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm local{};
  localtime_r(&seconds, &local);
  std::lock_guard<std::mutex> lock(mutex);
  std::fprintf(stderr, "[ember %s%c %02d:%02d:%02d.%03d] %.*s\n", LogTag().c_str(), kLetters[static_cast<int>(level)],
               local.tm_hour, local.tm_min, local.tm_sec, millis, static_cast<int>(message.size()),
               message.data());
}

}  // namespace ember
