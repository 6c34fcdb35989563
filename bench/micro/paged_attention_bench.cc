// Paged attention micro benchmarks over f16 KV at the shapes of the real models ember is
// compared on, for each compiled variant at 1 and 2 threads.
//
// Read the counters:
//   AttentionPrefill/<isa>/<model>/tokens:N/threads:T  FLOP/s   one request's N-token prompt, every
//       query over the keys it sees (causal, the model's window): 4 * head_dim flops per
//       (query head, key) pair, the work a flash kernel must do, diagonal padding not counted
//   AttentionDecode/<isa>/<model>/keys:N/threads:T     KV_B/s   16 requests, one query each, over N
//       keys: K and V bytes read per second (compare with StreamTriad in matmul_bench)
// Divide FLOP/s by the variant's peak f32 FMA (`ember bench roofline`) for the fraction of peak.
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/dtypes.h"
#include "core/isa.h"
#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "kernels/paged_attention.h"
#include "bench_setup.h"

namespace ember::kernels {
namespace {

constexpr const char* kVariants[] = {"generic", "avx2", "avx512"};
constexpr int kThreadCounts[] = {1, 2};
constexpr int64_t kBlock = 16;

struct ModelShape {
  const char* name;
  int64_t heads, kv_heads, head_dim, window;  // window -1: full attention
};
// SmolLM2-135M (9 heads over 3 KV heads, 64 wide) and Gemma 3 270M's sliding layers (4 over 1,
// 256 wide, 512-key window).
constexpr ModelShape kShapes[] = {{"smollm2", 9, 3, 64, -1}, {"gemma3", 4, 1, 256, 512}};

float NextValue(uint64_t& state) {
  state = state * 6364136223846793005ull + 1442695040888963407ull;
  return static_cast<float>(static_cast<int64_t>(state >> 40) - (int64_t{1} << 23)) / (1 << 23);
}

// `num_reqs` requests of `seq_len` positions each, the last `queries` of them queried.
struct AttentionCase {
  std::vector<uint16_t> keys, values;
  std::vector<int32_t> block_table, query_start, positions, seq_lens;
  std::vector<float> q, out;
  PagedKvView kv;
  PagedBatch batch;
  AttentionShape shape;
  int64_t tokens = 0;

  AttentionCase(const ModelShape& m, int64_t num_reqs, int64_t seq_len, int64_t queries) {
    const int64_t blocks_per_req = (seq_len + kBlock - 1) / kBlock;
    const int64_t num_blocks = num_reqs * blocks_per_req;
    const int64_t elements = num_blocks * kBlock * m.kv_heads * m.head_dim;
    uint64_t seed = 17;
    keys.resize(static_cast<size_t>(elements));
    values.resize(static_cast<size_t>(elements));
    for (uint16_t& k : keys) k = F32ToF16(NextValue(seed));
    for (uint16_t& v : values) v = F32ToF16(NextValue(seed));
    for (int64_t b = 0; b < num_blocks; ++b) block_table.push_back(static_cast<int32_t>(b));
    query_start.push_back(0);
    for (int64_t r = 0; r < num_reqs; ++r) {
      query_start.push_back(static_cast<int32_t>((r + 1) * queries));
      seq_lens.push_back(static_cast<int32_t>(seq_len));
      for (int64_t t = 0; t < queries; ++t) positions.push_back(static_cast<int32_t>(seq_len - queries + t));
    }
    tokens = num_reqs * queries;
    q.resize(static_cast<size_t>(tokens * m.heads * m.head_dim));
    for (float& x : q) x = NextValue(seed);
    out.resize(q.size());
    kv.dtype = DType::kF16;
    kv.keys = keys.data();
    kv.values = values.data();
    kv.num_blocks = num_blocks;
    kv.block_size = kBlock;
    kv.num_kv_heads = m.kv_heads;
    kv.head_dim = m.head_dim;
    batch = PagedBatch{num_reqs, query_start.data(), positions.data(), seq_lens.data(), block_table.data(),
                       blocks_per_req};
    shape = AttentionShape{m.heads, m.kv_heads, m.head_dim, 0.125f, m.window};
  }
  void Run() { PagedAttention(q.data(), tokens, batch, kv, shape, out.data()); }
  // FNV-1a over the output bits: two builds whose labels agree computed the same attention.
  std::string Checksum() const {
    uint64_t h = 1469598103934665603ull;
    for (const float& x : out) {
      uint32_t bits;
      std::memcpy(&bits, &x, sizeof(bits));
      h = (h ^ bits) * 1099511628211ull;
    }
    return fmt::format("bits:{:016x}", h);
  }
};

void BM_Prefill(benchmark::State& state, std::string variant, ModelShape m, int64_t tokens, int threads) {
  if (!bench::SelectVariantAndThreads(state, variant, threads)) return;
  AttentionCase c(m, 1, tokens, tokens);
  for (auto _ : state) c.Run();
  state.SetLabel(c.Checksum());
  double pairs = 0;  // (query position, key) pairs seen
  for (int64_t p = 0; p < tokens; ++p) pairs += static_cast<double>(m.window > 0 ? std::min(p + 1, m.window) : p + 1);
  state.counters["FLOP/s"] = benchmark::Counter(4.0 * m.head_dim * m.heads * pairs, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_Decode(benchmark::State& state, std::string variant, ModelShape m, int64_t keys, int threads) {
  if (!bench::SelectVariantAndThreads(state, variant, threads)) return;
  constexpr int64_t kRequests = 16;
  AttentionCase c(m, kRequests, keys, 1);
  for (auto _ : state) c.Run();
  state.SetLabel(c.Checksum());
  const int64_t seen = m.window > 0 ? std::min(keys, m.window) : keys;
  state.counters["KV_B/s"] =
      benchmark::Counter(static_cast<double>(2 * 2 * kRequests * seen * m.kv_heads * m.head_dim), benchmark::Counter::kIsIterationInvariantRate);
}

std::string Name(const char* kind, const std::string& variant, const ModelShape& m, const std::string& size,
                 int threads) {
  return std::string(kind) + "/" + variant + "/" + m.name + "/" + size + "/threads:" + std::to_string(threads);
}

bool RegisterAll() {
  for (const char* variant : kVariants) {
    for (const ModelShape& m : kShapes) {
      for (int threads : kThreadCounts) {
        for (int64_t tokens : {512, 2048}) {
          benchmark::RegisterBenchmark(Name("AttentionPrefill", variant, m, "tokens:" + std::to_string(tokens), threads).c_str(),
                                       BM_Prefill, std::string(variant), m, tokens, threads)
              ->Unit(benchmark::kMillisecond)
              ->UseRealTime();
        }
        benchmark::RegisterBenchmark(Name("AttentionDecode", variant, m, "keys:4096", threads).c_str(), BM_Decode,
                                     std::string(variant), m, int64_t{4096}, threads)
            ->Unit(benchmark::kMicrosecond)
            ->UseRealTime();
      }
    }
  }
  return true;
}

const bool kRegistered = RegisterAll();

}  // namespace
}  // namespace ember::kernels
