// Threading, tiling and prefetch settings shared by the quantized matmuls (GgufMatMul and
// BlockScaledMatMul): both stream packed weight rows and split output rows over the pool.
#pragma once

#include <cstdint>

namespace ember::quant {

// A thread's share must stream at least this many weight bytes (times m) to be worth waking a
// worker for: at ~10 GB/s per core 64 KiB is ~6 us, the order of a thread handoff.
inline constexpr int64_t kMinChunkBytes = int64_t{64} << 10;

// Weight rows per tile when m > 1: the tile (16 rows of a k = 4096 Q4 matrix is ~37 KB) stays in
// L2 while every activation row passes over it, and each activation row stays in L1 across the
// tile, so prefill reads weights from memory once, like decode.
inline constexpr int64_t kRowTile = 16;

// How far ahead of the dot product the weight rows are prefetched (whole rows, at least the
// next one). Each thread reads one sequential stream, which the hardware prefetchers alone left
// at ~60% of the STREAM triad here (they stop at 4 KiB page boundaries); prefetching the next
// row gained 15-35% single-threaded. Farther ahead (16-32 KiB) measured worse: the lines start
// to be evicted before use. BlockScaledMatMul does not issue a row's prefetches at once: it hands
// the row to its dot, which requests a line per 64 bytes as it goes (a burst of 32+ prefetches
// fills the line-fill buffers and stalls the loads behind it; spreading them took the 2-thread
// 4-bit GEMV from 70-79% to 82-97% of the triad, src/quant/README.md).
inline constexpr int64_t kPrefetchBytes = 4096;

// Requests every cache line of `bytes` bytes from `row` on.
inline void PrefetchRow(const uint8_t* row, int64_t bytes) {
  for (int64_t offset = 0; offset < bytes; offset += 64) __builtin_prefetch(row + offset);
}

}  // namespace ember::quant
