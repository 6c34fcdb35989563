// The kernel measurements of `ember bench roofline`: each of ember's hot kernels at one shape,
// timed on the global thread pool, as the rate that its roofline ceiling limits (weight GB/s for
// the memory-bound decode shapes, GFLOP/s for the compute-bound prefill shapes).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ember::tools::bench {

// kCompute: f32 (or bf16 widened to f32) multiply-adds, against the f32 FMA peak; kComputeInt8:
// the quantized GEMMs' int8 dot products, against the int8 multiply-add peak.
enum class Bound { kMemory, kCompute, kComputeInt8 };

struct KernelRate {
  std::string name;   // "gemv q4_1", "gemm f32", "paged attention prefill f16"
  std::string shape;  // "m=1 n=126976 k=4096 (520 MiB)"
  Bound bound = Bound::kMemory;
  double rate = 0;    // GB/s of weight (or KV) bytes for kMemory, GFLOP/s (2·m·n·k / s) otherwise
  double best_seconds = 0;
};

struct RooflineSizes {
  int64_t gemv_weight_bytes = 0;  // each decode GEMV matrix (make it larger than the LLC)
  int64_t gemv_k = 4096;
  int64_t gemm_m = 128;           // prefill tokens
  int64_t gemm_n = 1024;
  int64_t gemm_k = 1024;
  int64_t attention_tokens = 512;      // prefill attention: one request of this many tokens
  int64_t attention_kv_bytes = 0;      // decode attention: KV bytes read per step (larger than the LLC)
  int repetitions = 5;           // timed runs of each memory-bound kernel (each streams `big` bytes)
  // Timed runs of each compute-bound kernel: they take milliseconds, and on a shared machine the
  // best of many short runs is the one that had its cores to itself.
  int compute_repetitions = 20;
};

// All kernels at `sizes`, in table order. One weight matrix is resident at a time.
std::vector<KernelRate> MeasureKernels(const RooflineSizes& sizes);

}  // namespace ember::tools::bench
