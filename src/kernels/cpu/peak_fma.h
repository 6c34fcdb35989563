// Compute yardsticks: the peak f32 multiply-add rate of this host's widest vector unit, and the
// peak int8 multiply-add rate of the instruction sequence ember's quantized dots use.
//
// A prefill GEMM does many flops per weight byte, so its speed limit is arithmetic, not memory.
// Comparing a kernel's GFLOP/s with the matching number (same machine, same thread count) says
// how close it is to that limit: f32 GEMMs against the f32 FMA peak, quantized GEMMs (which
// multiply int8 activations by int8 / 4-bit weights) against the int8 peak. Each loop keeps many
// independent accumulators in registers (more than latency x ports), so nothing but the
// execution units limits it.
#pragma once

#include <cstdint>
#include <string_view>

namespace ember::kernels {

struct PeakFlops {
  std::string_view isa;  // "avx512" (16 lanes, FMA), "avx2" (8 lanes, FMA), "generic" (SSE2 mul + add)
  double gflops = 0;     // 1e9 f32 floating-point operations per second, an FMA counted as two
};

// Runs `iterations` rounds of the widest loop this host supports on each of `num_threads`
// threads at once (<= 0: as many as the global ThreadPool has), `repetitions` times, and
// returns the best rate.
PeakFlops MeasurePeakF32Flops(int64_t iterations, int repetitions, int num_threads);

// The per-ISA loops (cpu/avx2/, cpu/avx512/, peak_fma.cc): `iterations` rounds over their
// accumulators; return a value derived from every accumulator so the work cannot be dropped.
// *flops_per_iteration is the flops one round does.
double FmaLoopAvx512(int64_t iterations, int64_t* flops_per_iteration);
double FmaLoopAvx2(int64_t iterations, int64_t* flops_per_iteration);
double FmaLoopGeneric(int64_t iterations, int64_t* flops_per_iteration);

struct PeakInt8Ops {
  std::string_view isa;  // "avx512-vnni" (vpdpbusd), "avx2" (vpmaddubsw + vpmaddwd + vpaddd), "amx-int8", "none"
  double gops = 0;       // 1e9 int8 operations per second, a multiply-add counted as two; 0 for "none"
};

// The int8 counterpart of MeasurePeakF32Flops. Hosts without AVX2 report isa "none" and 0: ember
// has no SIMD int8 dot for them, so there is no peak to compare with.
PeakInt8Ops MeasurePeakInt8Ops(int64_t iterations, int repetitions, int num_threads);

// The AMX int8 peak: tdpbusd on register tiles (cpu/amx/), for hosts where the amx level runs
// (isa "amx-int8"), else isa "none" and 0. The packed GEMMs' AMX path (quant/gguf_packed.h) is
// measured against it and against the VNNI peak.
PeakInt8Ops MeasurePeakAmxInt8Ops(int64_t iterations, int repetitions, int num_threads);

// The int8 loops (cpu/avx2/, cpu/avx512/, cpu/amx/), same contract as the FMA loops.
double Int8DotLoopAvx512Vnni(int64_t iterations, int64_t* ops_per_iteration);
double Int8DotLoopAvx2(int64_t iterations, int64_t* ops_per_iteration);
double Int8DotLoopAmx(int64_t iterations, int64_t* ops_per_iteration);

}  // namespace ember::kernels
