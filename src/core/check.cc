#include "core/check.h"

#include <cstdio>
#include <cstdlib>

namespace ember::internal {

void CheckFailed(const char* file, int line, const char* condition, const std::string& message) {
  std::fprintf(stderr, "ember: check failed at %s:%d: %s%s%s\n", file, line, condition,
               message.empty() ? "" : " — ", message.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace ember::internal
