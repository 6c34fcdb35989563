// GGUF quantized GEMM rate per type, packed-GEMM variant (avx2 tiles for the 32-element types and
// row dots for the K-quants, avx512 VNNI tiles, amx tiles), m (1 and 4: decode and a speculative
// verification step; 16-512: prefill), model-like (n, k) and thread count, the matrix resident in
// cache (compute bound).
//
//   GgufGemm/<type>/<isa>/m:M/n:N/k:K/threads:T   gop/s       2 m n k / best call seconds / 1e9
//
// The shapes are SmolLM2-135M's (n = 576, k = 1536: the FFN down projection's k, q/o's n) and
// Gemma 3 270M's (640, 2048). The weights are packed as the models load them (PackQuantMatrix
// under the variant); quant bytes are random and the f16 scales near 0.01. Best call, not mean:
// on a shared machine it is the one that had its cores to itself.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/dtypes.h"
#include "core/isa.h"
#include "core/thread_pool.h"
#include "formats/ggml_type.h"
#include "quant/gguf_blocks.h"
#include "quant/gguf_matmul.h"
#include "quant/gguf_packed.h"
#include "bench_setup.h"

namespace ember::quant {
namespace {

constexpr GgmlType kTypes[] = {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1,
                               GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K};
constexpr const char* kVariants[] = {"avx2", "avx512", "amx"};
constexpr int64_t kRows[] = {1, 4, 16, 64, 256, 512};
constexpr int64_t kShapes[][2] = {{576, 1536}, {640, 2048}};
constexpr int kThreadCounts[] = {1, 2};

uint64_t NextBits(uint64_t& state) {
  state = state * 6364136223846793005ull + 1442695040888963407ull;
  return state ^ (state >> 29);
}

// Random quant bytes, every f16 scale field (d, and m / dmin where the block has one) ~0.01.
template <typename Block>
void FillBlocks(uint8_t* data, int64_t blocks, uint64_t& state) {
  for (int64_t i = 0; i < blocks * static_cast<int64_t>(sizeof(Block)); ++i) data[i] = static_cast<uint8_t>(NextBits(state));
  auto* b = reinterpret_cast<Block*>(data);
  for (int64_t i = 0; i < blocks; ++i) {
    const uint16_t scale = static_cast<uint16_t>(0x2000 + (NextBits(state) >> 54));
    if constexpr (requires { b[i].dmin; }) b[i].dmin = scale;
    if constexpr (requires { b[i].m; }) b[i].m = scale;
    b[i].d = scale;
  }
}

void Fill(GgmlType type, uint8_t* data, int64_t blocks) {
  uint64_t state = 3;
  switch (type) {
    case GgmlType::kQ4_0: return FillBlocks<BlockQ4_0>(data, blocks, state);
    case GgmlType::kQ4_1: return FillBlocks<BlockQ4_1>(data, blocks, state);
    case GgmlType::kQ5_0: return FillBlocks<BlockQ5_0>(data, blocks, state);
    case GgmlType::kQ5_1: return FillBlocks<BlockQ5_1>(data, blocks, state);
    case GgmlType::kQ8_0: return FillBlocks<BlockQ8_0>(data, blocks, state);
    case GgmlType::kQ4_K: return FillBlocks<BlockQ4_K>(data, blocks, state);
    case GgmlType::kQ5_K: return FillBlocks<BlockQ5_K>(data, blocks, state);
    case GgmlType::kQ6_K: return FillBlocks<BlockQ6_K>(data, blocks, state);
    default: return;
  }
}

void RunGemm(benchmark::State& state, GgmlType type, const char* isa, int64_t m, int64_t n, int64_t k, int threads) {
  if (!bench::SelectVariantAndThreads(state, isa, threads)) return;
  const GgmlTypeTraits traits = *GgmlTypeInfo(static_cast<uint32_t>(type));
  const int64_t row_bytes = *GgmlRowBytes(traits, k);
  std::vector<uint8_t> data(static_cast<size_t>(n * row_bytes));
  Fill(type, data.data(), n * row_bytes / traits.block_bytes);
  QuantMatrix w{type, data.data(), n, k, row_bytes};
  const std::shared_ptr<const void> packed = PackQuantMatrix(w);
  w.packed = packed.get();
  std::vector<float> x(static_cast<size_t>(m * k));
  uint64_t seed = 5;
  for (float& v : x) v = static_cast<float>(static_cast<int64_t>(NextBits(seed) >> 40) - (1 << 23)) / (1 << 23);
  std::vector<float> y(static_cast<size_t>(m * n));
  double best = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    GgufMatMul(x.data(), m, w, y.data());
    benchmark::DoNotOptimize(y.data());
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (best == 0 || seconds < best) best = seconds;
  }
  state.counters["gop/s"] = 2.0 * static_cast<double>(m * n * k) / best / 1e9;
}

const bool kRegistered = [] {
  for (const GgmlType type : kTypes) {
    const std::string name(GgmlTypeInfo(static_cast<uint32_t>(type))->name);
    for (const auto& shape : kShapes) {
      for (const int64_t m : kRows) {
        for (const int threads : kThreadCounts) {
          for (const char* isa : kVariants) {
            benchmark::RegisterBenchmark(
                ("GgufGemm/" + name + "/" + isa + "/m:" + std::to_string(m) + "/n:" + std::to_string(shape[0]) +
                 "/k:" + std::to_string(shape[1]) + "/threads:" + std::to_string(threads))
                    .c_str(),
                [=](benchmark::State& s) { RunGemm(s, type, isa, m, shape[0], shape[1], threads); })
                ->MinTime(0.2)
                ->UseRealTime();
          }
        }
      }
    }
  }
  return true;
}();

}  // namespace
}  // namespace ember::quant
