// How much memory the host has free: the engine's default KV budget and the deployment planner's
// CPU preset both size themselves from it, so it lives below both.
#pragma once

#include <cstdint>

namespace ember {

// MemAvailable from /proc/meminfo, 0 if unknown.
int64_t AvailableMemoryBytes();

// This process's resident memory from /proc/self/status: VmRSS, and of it RssAnon (heap, copies)
// and RssFile (mapped file pages); zeros if unknown.
struct ResidentMemory {
  int64_t total = 0, anon = 0, file = 0;
};
ResidentMemory ResidentMemoryBytes();

}  // namespace ember
