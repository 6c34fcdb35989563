// ember bench roofline: where ember's kernels stand against this machine's limits.
//
// For each thread count it measures the ceilings, memory bandwidth (STREAM triad and copy over
// arrays larger than the last-level cache), peak f32 FMA throughput (a register-only loop on the
// widest vector unit) and peak int8 multiply-add throughput (the quantized dots' instructions),
// then each hot kernel at a shape that one ceiling limits: decode GEMVs (f32, bf16, Q4_1, Q8_0,
// Q4_K) and decode attention over weights/KV larger than the LLC as GB/s of bytes read / triad
// GB/s; f32/bf16 prefill GEMMs and prefill attention as GFLOP/s / the f32 peak; quantized
// prefill GEMMs as GFLOP/s / the int8 peak. --quick shrinks every size to a smoke test whose numbers mean nothing.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/isa.h"
#include "core/thread_pool.h"
#include "kernels/cpu/peak_fma.h"
#include "kernels/cpu/stream.h"
#include "tools/ember/bench/bench_commands.h"
#include "tools/ember/bench/roofline_kernels.h"
#include "tools/ember/commands.h"
#include "tools/ember/common.h"

namespace ember::tools {
namespace {

struct RooflineOptions {
  std::vector<int> threads;  // empty: 1..all cores
  int64_t size_mib = 0;      // 0: twice the LLC (at least 64 MiB)
  bool quick = false;
  bool json = false;
};

// Bytes of the last-level cache, 0 if unknown.
int64_t LastLevelCacheBytes() {
  for (const int name : {_SC_LEVEL3_CACHE_SIZE, _SC_LEVEL2_CACHE_SIZE}) {
    const long bytes = sysconf(name);
    if (bytes > 0) return bytes;
  }
  std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index3/size");
  int64_t kib = 0;
  if (in >> kib) return kib * 1024;  // "260K"-style values: the unit letter stops the read
  return 0;
}

int RunRoofline(const RooflineOptions& o) {
  const int64_t llc = LastLevelCacheBytes();
  int64_t big = o.size_mib > 0 ? o.size_mib << 20 : std::max<int64_t>(int64_t{64} << 20, 2 * llc);
  bench::RooflineSizes sizes;
  sizes.gemv_weight_bytes = big;
  sizes.attention_kv_bytes = big;
  // ~3 ms per run with AVX-512, best of 40: short runs, for the same reason as compute_repetitions.
  int64_t fma_iterations = 1'000'000;
  int fma_reps = 40;
  int stream_reps = 5;
  if (o.quick) {
    big = int64_t{1} << 20;
    sizes = {.gemv_weight_bytes = big, .gemv_k = 256, .gemm_m = 8, .gemm_n = 64, .gemm_k = 256,
             .attention_tokens = 32, .attention_kv_bytes = big, .repetitions = 2, .compute_repetitions = 2};
    fma_iterations = 10'000;
    fma_reps = 2;
    stream_reps = 2;
  }
  std::vector<int> thread_counts = o.threads;
  if (thread_counts.empty()) {
    for (int t = 1; t <= AvailableCores(); ++t) thread_counts.push_back(t);
  }

  nlohmann::ordered_json out = {{"cpu", HostCpuFeatures().ToString()},
                                {"kernels", std::string(IsaName(ActiveIsa()))},
                                {"llc_bytes", llc},
                                {"stream_bytes_per_array", big},
                                {"quick", o.quick},
                                {"threads", nlohmann::ordered_json::array()}};
  if (!o.json) {
    std::printf("roofline: cpu %s; kernels %s; last-level cache %.0f MiB; arrays and weights %.0f MiB%s\n",
                HostCpuFeatures().ToString().c_str(), std::string(IsaName(ActiveIsa())).c_str(),
                llc / 1048576.0, big / 1048576.0, o.quick ? " (--quick: sizes too small to mean anything)" : "");
  }
  for (const int threads : thread_counts) {
    ThreadPool::SetGlobalThreads(threads);
    const double triad = kernels::MeasureStreamTriadGBps(big, stream_reps, threads);
    const double copy = kernels::MeasureStreamCopyGBps(big, stream_reps, threads);
    const kernels::PeakFlops peak = kernels::MeasurePeakF32Flops(fma_iterations, fma_reps, threads);
    const kernels::PeakInt8Ops int8_peak = kernels::MeasurePeakInt8Ops(fma_iterations, fma_reps, threads);
    // Where the amx level runs, the quantized GEMMs' prefill shapes use tiles: their rows are also
    // given as a fraction of the tile unit's peak.
    const kernels::PeakInt8Ops amx_peak = kernels::MeasurePeakAmxInt8Ops(fma_iterations, fma_reps, threads);
    const std::vector<bench::KernelRate> rates = bench::MeasureKernels(sizes);
    nlohmann::ordered_json level = {{"threads", threads},
                                    {"stream_triad_gbps", triad},
                                    {"stream_copy_gbps", copy},
                                    {"peak_fma_isa", std::string(peak.isa)},
                                    {"peak_f32_gflops", peak.gflops},
                                    {"peak_int8_isa", std::string(int8_peak.isa)},
                                    {"peak_int8_gops", int8_peak.gops},
                                    {"peak_amx_int8_gops", amx_peak.gops},
                                    {"kernels", nlohmann::ordered_json::array()}};
    if (!o.json) {
      std::printf("\n%d thread%s: STREAM triad %.2f GB/s, copy %.2f GB/s; peak f32 FMA %.1f GFLOP/s (%s); "
                  "peak int8 %.1f GOP/s (%s)",
                  threads, threads == 1 ? "" : "s", triad, copy, peak.gflops, std::string(peak.isa).c_str(),
                  int8_peak.gops, std::string(int8_peak.isa).c_str());
      if (amx_peak.gops > 0) std::printf("; peak AMX int8 %.1f GOP/s (tdpbusd)", amx_peak.gops);
      std::printf("\n  %-24s %-40s %-8s %12s %12s %9s%s\n", "kernel", "shape", "bound", "achieved", "ceiling", "fraction",
                  amx_peak.gops > 0 ? "    of AMX" : "");
    }
    for (const bench::KernelRate& r : rates) {
      const bool memory = r.bound == bench::Bound::kMemory;
      // Without a SIMD int8 dot (int8 isa "none") the quantized GEMMs fall back to f32 math.
      const bool int8 = r.bound == bench::Bound::kComputeInt8 && int8_peak.gops > 0;
      const double ceiling = memory ? triad : int8 ? int8_peak.gops : peak.gflops;
      const char* unit = memory ? "GB/s" : "GFLOP/s";
      level["kernels"].push_back({{"name", r.name},
                                  {"shape", r.shape},
                                  {"bound", memory ? "memory" : int8 ? "compute-int8" : "compute"},
                                  {"unit", unit},
                                  {"achieved", r.rate},
                                  {"ceiling", ceiling},
                                  {"fraction", r.rate / ceiling},
                                  {"best_seconds", r.best_seconds}});
      const bool amx = int8 && amx_peak.gops > 0;
      if (amx) level["kernels"].back()["fraction_of_amx_peak"] = r.rate / amx_peak.gops;
      if (!o.json) {
        std::printf("  %-24s %-40s %-8s %7.1f %-4s %7.1f %-4s %8.1f%%", r.name.c_str(), r.shape.c_str(),
                    memory ? "memory" : int8 ? "int8" : "compute", r.rate, memory ? "GB/s" : "GF/s", ceiling,
                    memory ? "GB/s" : int8 ? "GO/s" : "GF/s", 100.0 * r.rate / ceiling);
        if (amx) std::printf(" %8.1f%%", 100.0 * r.rate / amx_peak.gops);
        std::printf("\n");
      }
    }
    out["threads"].push_back(std::move(level));
    std::fflush(stdout);
  }
  if (o.json) {
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf("\nmemory-bound rows: bytes read (weights or KV) per second / STREAM triad; compute rows: GFLOP/s\n"
                "(2*m*n*k per second) / the f32 FMA peak; int8 rows (quantized GEMMs, which multiply int8 activations\n"
                "by quantized weights): the same GFLOP/s / the int8 multiply-add peak (vpdpbusd), and where the host\n"
                "has AMX also / the tile unit's peak (\"of AMX\"; the amx level runs these shapes on tiles).\n");
  }
  return 0;
}

}  // namespace

void RegisterBenchRooflineCommand(CLI::App* bench) {
  auto o = std::make_shared<RooflineOptions>();
  CLI::App* cmd = bench->add_subcommand(
      "roofline", "Memory bandwidth and peak FMA of this machine, and each kernel's achieved fraction of them");
  cmd->add_option("--threads", o->threads, "Thread counts to measure, e.g. 1,2 (default: 1 to all cores)")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  cmd->add_option("--size-mib", o->size_mib,
                  "STREAM arrays, decode weights and KV in MiB (default: twice the last-level cache)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--quick", o->quick, "Tiny sizes: a smoke test of the command, not a measurement");
  cmd->add_flag("--json", o->json, "Print JSON");
  cmd->callback([o] { SetExitCode(RunRoofline(*o)); });
}

}  // namespace ember::tools
