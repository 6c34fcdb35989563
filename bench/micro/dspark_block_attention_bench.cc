// The DSpark drafter's block attention (spec/dspark/block_attention.h) at the committed SmolLM2
// drafter's shape, one thread, per kernel variant: every query head of one 7-token block of one
// layer over a request's context K/V, the work each drafter layer does per drafted request.
//
// Read the counters:
//   DSparkBlockAttention/<isa>/context:N   time per block-layer; keys/s = (N + 7) keys x 7 queries
//       x 9 heads per block-layer, per second
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <vector>

#include "spec/dspark/block_attention.h"
#include "spec/dspark/context_store.h"
#include "bench_setup.h"

namespace ember::spec::dspark {
namespace {

constexpr const char* kVariants[] = {"generic", "avx2", "avx512"};
constexpr int64_t kContexts[] = {64, 256, 1024};

float NextValue(uint64_t& state) {
  state = state * 6364136223846793005ull + 1442695040888963407ull;
  return static_cast<float>(static_cast<int64_t>(state >> 40) - (int64_t{1} << 23)) / (1 << 23);
}

std::vector<float> Values(int64_t n, uint64_t seed) {
  std::vector<float> out(n);
  for (float& x : out) x = NextValue(seed);
  return out;
}

void BM_DSparkBlockAttention(benchmark::State& state, const std::string& variant, int64_t context_size) {
  if (!bench::SelectVariantAndThreads(state, variant, 1)) return;
  // The committed SmolLM2 drafter: 9 query heads over 3 KV heads, 64 wide, blocks of 7,
  // bidirectional, no window.
  const BlockAttentionShape shape{.num_heads = 9, .num_kv_heads = 3, .head_dim = 64, .block_size = 7,
                                  .window = -1, .causal = false, .scale = 0.125f};
  const int64_t q_width = shape.num_heads * shape.head_dim;
  const int64_t kv_width = shape.num_kv_heads * shape.head_dim;
  DSparkContext context(/*num_layers=*/1, kv_width, shape.window);
  const std::vector<float> context_k = Values(context_size * kv_width, 1);
  const std::vector<float> context_v = Values(context_size * kv_width, 2);
  context.Append(context_k.data(), context_v.data(), context_size);
  const std::vector<float> q = Values(shape.block_size * q_width, 3);
  const std::vector<float> k = Values(shape.block_size * kv_width, 4);
  const std::vector<float> v = Values(shape.block_size * kv_width, 5);
  std::vector<float> scores(ScoresScratch(shape, context_size));
  std::vector<float> out(shape.block_size * q_width);
  for (auto _ : state) {
    for (int64_t head = 0; head < shape.num_heads; ++head) {
      AttendBlockHead(shape, context, 0, context_size, head, q.data(), k.data(), v.data(), scores.data(),
                      out.data(), shape.block_size);
    }
    benchmark::DoNotOptimize(out.data());
  }
  const double keys = static_cast<double>(context_size + shape.block_size) * shape.block_size * shape.num_heads;
  state.counters["keys/s"] = benchmark::Counter(keys, benchmark::Counter::kIsIterationInvariantRate);
}

[[maybe_unused]] const bool kRegistered = [] {
  for (const char* variant : kVariants) {
    for (int64_t context : kContexts) {
      const std::string name = fmt::format("DSparkBlockAttention/{}/context:{}", variant, context);
      benchmark::RegisterBenchmark(name.c_str(), BM_DSparkBlockAttention, std::string(variant), context)
          ->Unit(benchmark::kMicrosecond);
    }
  }
  return true;
}();

}  // namespace
}  // namespace ember::spec::dspark
