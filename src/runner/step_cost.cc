#include "runner/step_cost.h"

#include <algorithm>
#include <chrono>

#include "core/check.h"

namespace ember {
namespace {

ForwardBatch SyntheticStep(int64_t n, int64_t vocab, const kv::KvCacheConfig& config) {
  ForwardBatch b;
  uint64_t state = 0x9E3779B97F4A7C15ull;
  for (int64_t p = 0; p < n; ++p) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;  // any spread of ids: MoE routes vary
    b.token_ids.push_back(static_cast<int32_t>((state >> 33) % static_cast<uint64_t>(vocab)));
    b.positions.push_back(static_cast<int32_t>(p));
    b.logits_indices.push_back(static_cast<int32_t>(p));
  }
  b.query_start_loc = {0, static_cast<int32_t>(n)};
  b.seq_lens = {static_cast<int32_t>(n)};
  const int64_t bs = config.block_size;
  const int32_t blocks = static_cast<int32_t>((n + bs - 1) / bs);
  for (size_t g = 0; g < config.groups.size(); ++g) {
    KvGroupTable table;
    table.max_blocks_per_req = blocks;
    for (int32_t j = 0; j < blocks; ++j) table.block_table.push_back(1 + j);  // block 0 is the null block
    for (int64_t p = 0; p < n; ++p) table.slot_mapping.push_back((1 + p / bs) * bs + p % bs);
    b.groups.push_back(std::move(table));
  }
  return b;
}

constexpr int64_t kRefinedTokens = 8;  // widths measured again after the first pass
constexpr int kRefineRuns = 5;

}  // namespace

void KeepNonDecreasing(StepCostModel* cost) {
  for (size_t i = 1; i < cost->seconds.size(); ++i) cost->seconds[i] = std::max(cost->seconds[i], cost->seconds[i - 1]);
}

Expected<StepCostModel> MeasureStepCost(CausalLM& model, KvStore& kv, const StepCostOptions& options) {
  const kv::KvCacheConfig& config = kv.config();
  const int64_t max_tokens = std::min(options.max_tokens, (config.num_blocks - 1) * config.block_size);
  EMBER_CHECK(max_tokens >= 1);
  StepCostModel cost;
  ForwardOutput out;
  const auto start = std::chrono::steady_clock::now();
  const auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  // The fastest of `runs` forwards of an n-token step: other load only ever adds time.
  const auto fastest = [&](int64_t n, int runs) -> Expected<double> {
    const ForwardBatch batch = SyntheticStep(n, model.info().vocab_size, config);
    double best = 0;
    for (int run = 0; run < runs; ++run) {
      const auto t0 = std::chrono::steady_clock::now();
      EMBER_RETURN_IF_ERROR(model.Forward(batch, kv, &out));
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (run == 0 || s < best) best = s;
    }
    return best;
  };
  // Dense where speculation decides (a few tokens per request), sparser beyond. Each point: a
  // warm-up forward (caches, the workspace), then the faster of two.
  for (int64_t n = 1; n <= max_tokens; n = n < 4 ? n + 1 : n < 16 ? n + 2 : n + n / 2) {
    EMBER_RETURN_IF_ERROR(fastest(n, 1).status());
    EMBER_ASSIGN_OR_RETURN(const double best, fastest(n, 2));
    cost.tokens.push_back(n);
    cost.seconds.push_back(best);
    if (elapsed() > options.time_budget_s) break;
  }
  // Then more runs of the narrowest steps, whose differences decide verification at a few
  // requests and which are cheap to repeat, within a budget of their own (so the widths above
  // are still measured on a slow model).
  for (size_t i = 0; i < cost.tokens.size() && cost.tokens[i] <= kRefinedTokens; ++i) {
    if (elapsed() > options.time_budget_s + options.refine_budget_s) break;
    EMBER_ASSIGN_OR_RETURN(const double best, fastest(cost.tokens[i], kRefineRuns));
    cost.seconds[i] = std::min(cost.seconds[i], best);
  }
  KeepNonDecreasing(&cost);
  return cost;
}

}  // namespace ember
