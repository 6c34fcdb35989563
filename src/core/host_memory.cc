#include "core/host_memory.h"

#include <cstdio>
#include <fstream>
#include <string>

namespace ember {

int64_t AvailableMemoryBytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

ResidentMemory ResidentMemoryBytes() {
  std::ifstream status("/proc/self/status");
  std::string key;
  ResidentMemory m;
  for (std::string line; std::getline(status, line);) {
    int64_t kib = 0;
    if (std::sscanf(line.c_str(), "VmRSS: %ld kB", &kib) == 1) m.total = kib * 1024;
    if (std::sscanf(line.c_str(), "RssAnon: %ld kB", &kib) == 1) m.anon = kib * 1024;
    if (std::sscanf(line.c_str(), "RssFile: %ld kB", &kib) == 1) m.file = kib * 1024;
  }
  return m;
}

}  // namespace ember
