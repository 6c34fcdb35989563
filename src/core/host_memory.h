// How much memory the host has free: the engine's default KV budget and the deployment planner's
// CPU preset both size themselves from it, so it lives below both.
#pragma once

#include <cstdint>

namespace ember {

// MemAvailable from /proc/meminfo, 0 if unknown.
int64_t AvailableMemoryBytes();

}  // namespace ember
