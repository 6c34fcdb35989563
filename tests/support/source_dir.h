// The source tree's root, for the tests and fuzz targets that read committed fixtures
// (std::string(EMBER_SOURCE_DIR) + "/tests/..."; a value, not a literal). Found at run time, never compiled in: an absolute path in a
// compile command differs between two clones, and ccache could then reuse none of the test
// objects in a fresh clone (CI's). ctest sets $EMBER_SOURCE_DIR (tests/CMakeLists.txt); a test
// binary run by hand from a build folder inside the tree finds the root above itself.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

namespace ember::test {

inline const char* SourceDir() {
  static const std::string dir = [] {
    if (const char* env = std::getenv("EMBER_SOURCE_DIR"); env != nullptr && *env != '\0') return std::string(env);
    std::error_code error;
    std::filesystem::path at = std::filesystem::read_symlink("/proc/self/exe", error).parent_path();
    for (; !error && at.has_relative_path(); at = at.parent_path()) {
      if (std::filesystem::exists(at / "tests/support/source_dir.h", error)) return at.string();
    }
    std::fprintf(stderr, "no source tree above this executable: set EMBER_SOURCE_DIR to the ember checkout\n");
    std::abort();
  }();
  return dir.c_str();
}

}  // namespace ember::test

#define EMBER_SOURCE_DIR (::ember::test::SourceDir())
