// Memory-bandwidth yardsticks: the STREAM "triad" kernel, a[i] = b[i] + s * c[i], and "copy",
// a[i] = b[i].
//
// A decode step (m = 1 matmul) streams every weight once and does almost no arithmetic per
// byte, so its speed limit is the sustainable memory bandwidth. Comparing a GEMV's weight
// GB/s against this triad number on the same machine and thread count says how close the
// kernel is to that limit.
#pragma once

#include <cstdint>

namespace ember::kernels {

// Runs the triad over three double arrays of `bytes_per_array` bytes each, split into
// contiguous chunks over `num_threads` threads (<= 0: the global ThreadPool; otherwise a
// temporary pool of that size), `repetitions` times, and returns the best rate in GB/s
// (1e9 bytes per second).
//
// Bytes are counted as STREAM counts them: 3 * bytes_per_array per pass (read b, read c,
// write a). With ordinary cached stores the hardware also reads each line of `a` before
// writing it (write-allocate); that fourth stream is NOT counted, again as in STREAM, so the
// DRAM traffic is really 4/3 of the reported figure. Arrays must be several times larger
// than the last-level cache for the result to mean memory bandwidth (e.g. 512 MB each for a
// 260 MB L3). The arrays are first touched by the same threads that later use them, so on a
// NUMA machine each chunk lives near its thread.
double MeasureStreamTriadGBps(int64_t bytes_per_array, int repetitions, int num_threads);

// The same for STREAM "copy", a[i] = b[i]: 2 * bytes_per_array counted per pass (read b, write
// a), again without the write-allocate read of a.
double MeasureStreamCopyGBps(int64_t bytes_per_array, int repetitions, int num_threads);

}  // namespace ember::kernels
