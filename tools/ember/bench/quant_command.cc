// ember bench quant: weight-streaming rate of the block-scaled kernels (MXFP4, NVFP4, FP8) at decode
// shapes, printed beside the STREAM triad bandwidth measured in the same run and thread count.
//
// A decode step reads each expert matrix once, from DRAM: no single Muse expert (8192 x 4096 at
// 4.25-4.5 bits is ~18 MB) exceeds a server's last-level cache, but the experts of a whole forward
// pass do. So each measurement cycles through a pool of copies of the matrix totalling
// --pool-mib (default 1 GiB, four times a 260 MB L3): every call streams a matrix that is not
// in cache, as in decode. The rate counts packed weight bytes (codes + scales) per second; the
// activation row stays in cache.
//
// The machine this was written on is shared, and its bandwidth varies with the neighbours' load
// from second to second. So each row alternates --rounds times between a STREAM triad measurement
// and the kernel's, and prints the best of each: the ratio compares measurements taken under the
// same conditions, minutes apart from no other row's. A closing table gives each format and
// variant's fraction of the triad (min-max over the shapes) per thread count.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/cpu_features.h"
#include "core/isa.h"
#include "core/thread_pool.h"
#include "kernels/cpu/stream.h"
#include "quant/block_scaled.h"
#include "quant/block_scaled_dot.h"
#include "tools/ember/bench/bench_commands.h"
#include "tools/ember/commands.h"
#include "tools/ember/common.h"

namespace ember::tools {
namespace {

struct QuantBenchOptions {
  std::vector<std::string> shapes = {"4096x4096", "8192x4096", "16384x4096"};
  std::vector<std::string> formats = {"mxfp4", "nvfp4", "fp8"};
  std::vector<std::string> variants;  // empty: every available one but ref
  std::vector<int> threads = {1, 2};
  int64_t m = 1;
  int64_t pool_mib = 1024;
  int64_t stream_mib = 512;
  int reps = 2;    // sweeps through the pool (or triad passes) per measurement
  int rounds = 3;  // alternations of triad and kernel measurement per row
};

struct Shape {
  int64_t rows, cols;
};

Expected<Shape> ParseShape(const std::string& text) {
  const size_t x = text.find('x');
  if (x == std::string::npos) return InvalidArgument(fmt::format("shape '{}' is not ROWSxCOLS", text));
  Shape s{std::atoll(text.substr(0, x).c_str()), std::atoll(text.substr(x + 1).c_str())};
  if (s.rows <= 0 || s.cols <= 0 || s.cols % 32 != 0) {
    return InvalidArgument(fmt::format("shape '{}' needs positive sizes and COLS a multiple of 32", text));
  }
  return s;
}

Expected<quant::WeightFormat> ParseFormat(const std::string& name) {
  for (quant::WeightFormat f :
       {quant::WeightFormat::kMxfp4, quant::WeightFormat::kNvfp4, quant::WeightFormat::kFp8E4m3}) {
    if (quant::WeightFormatName(f) == name) return f;
  }
  return InvalidArgument(fmt::format("unknown format '{}' (mxfp4, nvfp4, fp8)", name));
}

// Copies of one matrix with random codes and realistic scales (FP8: per-channel), totalling at
// least pool_bytes.
struct Pool {
  std::vector<std::vector<uint8_t>> codes, scales;
  std::vector<quant::BlockScaledMatrix> matrices;
};

Pool MakePool(quant::WeightFormat format, Shape shape, int64_t pool_bytes, std::mt19937& rng) {
  Pool pool;
  const bool fp8 = format == quant::WeightFormat::kFp8E4m3;
  const int64_t code_bytes = shape.rows * quant::CodesRowBytes(format, shape.cols);
  const int64_t scale_bytes = fp8 ? shape.rows * 4 : shape.rows * quant::ScalesRowBytes(format, shape.cols);
  const int64_t copies = std::max<int64_t>(2, (pool_bytes + code_bytes + scale_bytes - 1) / (code_bytes + scale_bytes));
  // One random matrix, copied: identical copies stream from memory like distinct ones, and filling
  // a gigabyte with random bytes would take longer than measuring it.
  std::vector<uint8_t> first_codes(code_bytes), first_scales(scale_bytes);
  for (auto& b : first_codes) b = static_cast<uint8_t>(rng());
  if (fp8) {
    for (auto& b : first_codes) b &= 0xf7;  // no 0x7f / 0xff NaN codes
    auto* f = reinterpret_cast<float*>(first_scales.data());
    for (int64_t r = 0; r < shape.rows; ++r) f[r] = 1e-3f * static_cast<float>(1 + rng() % 100);
  } else {
    // e8m0 around 2^-6, e4m3 scales in [0.5, 8).
    for (auto& b : first_scales) b = format == quant::WeightFormat::kMxfp4 ? 118 + rng() % 4 : 0x30 + rng() % 32;
  }
  for (int64_t c = 0; c < copies; ++c) {
    pool.codes.push_back(first_codes);
    pool.scales.push_back(first_scales);
    pool.matrices.push_back(
        quant::DenseBlockScaledMatrix(format, shape.rows, shape.cols, pool.codes.back().data(),
                                      pool.scales.back().data(), format == quant::WeightFormat::kNvfp4 ? 1e-3f : 1.0f,
                                      fp8 ? quant::Fp8ScaleKind::kPerChannel : quant::Fp8ScaleKind::kPerTensor));
  }
  return pool;
}

// Best rate over `reps` sweeps through the pool, in GB/s of packed weight bytes.
double MeasureGBps(const Pool& pool, const std::vector<float>& x, int64_t m, int reps) {
  std::vector<float> y(m * pool.matrices[0].rows);
  for (const auto& w : pool.matrices) quant::BlockScaledMatMul(x.data(), m, w, y.data());  // warm-up: page in
  double best = 0;
  for (int rep = 0; rep < reps; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    int64_t bytes = 0;
    for (const auto& w : pool.matrices) {
      quant::BlockScaledMatMul(x.data(), m, w, y.data());
      bytes += w.PackedBytes();
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, bytes / seconds / 1e9);
  }
  return best;
}

std::string LoadAverage() {
  double load[3] = {0, 0, 0};
  if (getloadavg(load, 3) != 3) return "unknown";
  return fmt::format("{:.2f} {:.2f} {:.2f}", load[0], load[1], load[2]);
}

int RunQuantBench(const QuantBenchOptions& o) {
  std::vector<Shape> shapes;
  for (const std::string& s : o.shapes) {
    auto parsed = ParseShape(s);
    if (!parsed.ok()) return Fail(parsed.status());
    shapes.push_back(*parsed);
  }
  std::vector<quant::WeightFormat> formats;
  for (const std::string& f : o.formats) {
    auto parsed = ParseFormat(f);
    if (!parsed.ok()) return Fail(parsed.status());
    formats.push_back(*parsed);
  }
  std::vector<std::string> variants = o.variants;
  if (variants.empty()) {
    for (Isa isa : AvailableIsas()) {
      if (isa != Isa::kRef) variants.emplace_back(IsaName(isa));
    }
  }
  for (const std::string& v : variants) {
    if (Status s = SelectIsa(v); !s.ok()) return Fail(s);
  }

  std::printf("Block-scaled GEMV weight streaming (m = %lld), pool %lld MiB, best of %d rounds of %d sweeps\n",
              static_cast<long long>(o.m), static_cast<long long>(o.pool_mib), o.rounds, o.reps);
  std::printf("machine: %s; load average at start: %s\n", HostCpuFeatures().ToString().c_str(), LoadAverage().c_str());
  std::printf("STREAM triad: %lld MiB arrays, measured alternately with each row's kernel\n",
              static_cast<long long>(o.stream_mib));
  std::mt19937 rng(1);
  // Kernel / triad ratios per (format, variant) and thread count, for the summary at the end
  // (printed in the order measured).
  std::vector<std::pair<std::string, std::string>> summary_rows;
  std::map<std::pair<std::string, std::string>, std::map<int, std::vector<double>>> ratios;
  for (int threads : o.threads) {
    ThreadPool::SetGlobalThreads(threads);
    std::printf("\n%d thread(s)\n  %-6s %-12s %-8s %10s %12s %9s\n", threads, "format", "shape", "variant", "GB/s",
                "triad GB/s", "of triad");
    for (quant::WeightFormat format : formats) {
      for (const Shape& shape : shapes) {
        const Pool pool = MakePool(format, shape, o.pool_mib << 20, rng);
        std::vector<float> x(o.m * shape.cols);
        std::normal_distribution<float> normal;
        for (float& v : x) v = normal(rng);
        for (const std::string& v : variants) {
          EMBER_CHECK(SelectIsa(v).ok(), "{}", v);  // checked above
          double gbps = 0, triad = 0;
          for (int round = 0; round < o.rounds; ++round) {
            triad = std::max(triad, kernels::MeasureStreamTriadGBps(o.stream_mib << 20, o.reps, threads));
            gbps = std::max(gbps, MeasureGBps(pool, x, o.m, o.reps));
          }
          const std::string format_name(quant::WeightFormatName(format));
          std::printf("  %-6s %-12s %-8s %10.2f %12.2f %8.0f%%\n", format_name.c_str(),
                      fmt::format("{}x{}", shape.rows, shape.cols).c_str(), v.c_str(), gbps, triad, 100 * gbps / triad);
          if (!ratios.contains({format_name, v})) summary_rows.emplace_back(format_name, v);
          ratios[{format_name, v}][threads].push_back(gbps / triad);
          std::fflush(stdout);
        }
      }
    }
  }
  // Issue #4's target reads off this table: 4-bit GEMV at >= 80% of the triad with 2 threads.
  std::printf("\nFraction of the STREAM triad measured beside it (min-max over the shapes)\n  %-6s %-8s", "format",
              "variant");
  for (int threads : o.threads) std::printf(" %12s", fmt::format("{} thread{}", threads, threads == 1 ? "" : "s").c_str());
  std::printf("\n");
  for (const auto& key : summary_rows) {
    const auto& by_threads = ratios.at(key);
    std::printf("  %-6s %-8s", key.first.c_str(), key.second.c_str());
    for (int threads : o.threads) {
      const std::vector<double>& r = by_threads.at(threads);
      const auto [low, high] = std::minmax_element(r.begin(), r.end());
      std::printf(" %12s", fmt::format("{:.0f}-{:.0f}%", 100 * *low, 100 * *high).c_str());
    }
    std::printf("\n");
  }
  std::printf("\nload average at end: %s\n", LoadAverage().c_str());
  return 0;
}

}  // namespace

void RegisterBenchQuantCommand(CLI::App* bench) {
  auto o = std::make_shared<QuantBenchOptions>();
  CLI::App* cmd = bench->add_subcommand("quant", "MXFP4 / NVFP4 / FP8 kernel weight GB/s vs STREAM triad");
  cmd->add_option("--shapes", o->shapes, "Weight shapes ROWSxCOLS (out x in)");
  cmd->add_option("--formats", o->formats, "mxfp4, nvfp4, fp8 (FP8 with per-channel scales)");
  cmd->add_option("--variants", o->variants, "Kernel variants (default: all available but ref)");
  cmd->add_option("--threads", o->threads, "Thread counts to measure");
  cmd->add_option("--m", o->m, "Activation rows (1: decode GEMV)")->check(CLI::PositiveNumber);
  cmd->add_option("--pool-mib", o->pool_mib, "Bytes of distinct matrices cycled through per measurement")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--stream-mib", o->stream_mib, "STREAM array size in MiB (3 arrays)")->check(CLI::PositiveNumber);
  cmd->add_option("--reps", o->reps, "Sweeps (triad passes) per measurement")->check(CLI::PositiveNumber);
  cmd->add_option("--rounds", o->rounds, "Alternations of triad and kernel per row (best of each is reported)")
      ->check(CLI::PositiveNumber);
  cmd->callback([o] { SetExitCode(RunQuantBench(*o)); });
}

}  // namespace ember::tools
