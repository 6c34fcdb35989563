// The whole engine on a real (tiny, hybrid sliding/full) Muse Spark checkpoint: scheduler, KV
// manager, runner, paged attention and sampler together. Proves the invariants end to end:
// a request's output does not depend on what it is batched with, on chunked prefill or on
// preemption; prefix caching computes only the last partial block again; sliding-window groups
// hold a bounded number of blocks on long sequences.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <random>

#include "model/causal_lm.h"
#include "support/engine_run.h"
#include "support/source_dir.h"
#include "unit/runner/local_engine_support.h"
#include "runner/local_engine.h"

namespace ember {
namespace {

const std::string kTinyA = std::string(EMBER_SOURCE_DIR) + "/tests/golden/muse_spark/tiny_a";

using test::RunResult;
using Result = RunResult;

using test::MakeEngine;

EngineOptions Options() {
  EngineOptions o;
  o.kv_cache_dtype = "f32";
  o.max_model_len = 512;
  o.max_num_seqs = 16;
  o.max_num_batched_tokens = 64;
  o.kv_cache_memory_bytes = 64 << 20;
  return o;
}

std::vector<int32_t> Prompt(int length, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> ids(length);
  for (int32_t& id : ids) id = static_cast<int32_t>(rng() % 500) + 1;
  return ids;
}

RequestInput Input(std::vector<int32_t> prompt, int max_tokens, float temperature = 0, uint64_t seed = 1) {
  RequestInput in;
  in.prompt_token_ids = std::move(prompt);
  in.sampling.max_tokens = max_tokens;
  in.sampling.temperature = temperature;
  in.sampling.seed = seed;
  in.sampling.logprobs = 3;
  in.sampling.ignore_eos = true;
  return in;
}

// Each call adds its requests under fresh indices, so one engine can run several workloads.
std::map<RequestIndex, Result> RunAll(LocalEngine& engine, const std::vector<RequestInput>& inputs) {
  static RequestIndex next = 0;
  const RequestIndex first = next;
  next += inputs.size();
  return test::RunToCompletion(engine.core(), inputs, first);
}

void ExpectSameOutput(const Result& alone, const Result& other, const std::string& what) {
  ASSERT_EQ(alone.tokens, other.tokens) << what;
  ASSERT_EQ(alone.logprobs.size(), other.logprobs.size()) << what;
  for (size_t i = 0; i < alone.logprobs.size(); ++i) {
    EXPECT_NEAR(alone.logprobs[i].logprob, other.logprobs[i].logprob, 1e-6) << what << " token " << i;
    EXPECT_EQ(alone.logprobs[i].top_ids, other.logprobs[i].top_ids) << what << " token " << i;
    for (size_t k = 0; k < alone.logprobs[i].top_logprobs.size(); ++k) {
      EXPECT_NEAR(alone.logprobs[i].top_logprobs[k], other.logprobs[i].top_logprobs[k], 1e-6) << what;
    }
  }
}

// Request 0 is greedy, request 1 seeded sampling; the rest are 14 others of varied lengths.
std::vector<RequestInput> Workload(bool with_others) {
  std::vector<RequestInput> inputs = {Input(Prompt(70, 1), 20), Input(Prompt(33, 2), 20, 0.8f, 77)};
  if (with_others) {
    for (int i = 0; i < 14; ++i) {
      inputs.push_back(Input(Prompt(5 + 9 * i, 100 + i), 4 + 3 * (i % 5), i % 2 ? 0.7f : 0.0f, 1000 + i));
    }
  }
  return inputs;
}

TEST(EngineTest, OutputDoesNotDependOnBatchChunkingOrPreemption) {
  std::map<RequestIndex, Result> alone;
  {
    auto engine = MakeEngine(kTinyA, Options());
    auto first = RunAll(*engine, {Workload(false)[0]});
    auto second = RunAll(*engine, {Workload(false)[1]});
    alone[0] = first[0];
    alone[1] = second[0];
  }
  ASSERT_EQ(alone[0].tokens.size(), 20u);

  struct Variant {
    std::string name;
    EngineOptions options;
  };
  std::vector<Variant> variants;
  variants.push_back({"batched with 14 others", Options()});
  EngineOptions no_chunking = Options();
  no_chunking.enable_chunked_prefill = false;
  no_chunking.max_num_batched_tokens = 512;
  variants.push_back({"batched, chunked prefill off", no_chunking});
  EngineOptions no_prefix = Options();
  no_prefix.enable_prefix_caching = false;
  no_prefix.max_num_batched_tokens = 16;
  variants.push_back({"batched, 16-token steps, prefix caching off", no_prefix});
  EngineOptions tiny_pool = Options();
  // Room for a few sequences only: the scheduler must preempt and recompute.
  tiny_pool.kv_cache_memory_bytes = 0;
  variants.push_back({"batched, preemption forced", tiny_pool});

  for (Variant& v : variants) {
    if (v.name == "batched, preemption forced") {
      auto probe = MakeEngine(kTinyA, Options());
      const int64_t per_block = probe->plan().kv.BytesPerBlock();
      v.options.kv_cache_memory_bytes = per_block * 24;
      v.options.max_model_len = 128;
    }
    auto engine = MakeEngine(kTinyA, v.options);
    auto results = RunAll(*engine, Workload(true));
    ExpectSameOutput(alone[0], results[0], v.name + ", greedy request");
    ExpectSameOutput(alone[1], results[1], v.name + ", seeded request");
    for (auto& [req, r] : results) EXPECT_EQ(r.reason, FinishReason::kLength) << v.name << " request " << req;
    if (v.name == "batched, preemption forced") {
      EXPECT_GT(engine->core().Stats().num_preemptions, 0);
    }
    EXPECT_EQ(engine->core().Stats().kv_usage, 0.0) << v.name;
  }
}

// The second identical prompt recomputes only its last partial block (and nothing else).
void ExpectPrefixReuse(const std::string& path, int prompt_len) {
  EngineOptions o = Options();
  auto engine = MakeEngine(path, o);
  const int64_t block = engine->plan().kv.block_size;
  const std::vector<int32_t> prompt = Prompt(prompt_len, 9);
  const int64_t before = engine->runner().num_tokens_computed();
  auto first = RunAll(*engine, {Input(prompt, 1)});
  const int64_t first_computed = engine->runner().num_tokens_computed() - before;
  EXPECT_EQ(first_computed, prompt_len);
  auto second = RunAll(*engine, {Input(prompt, 1)});
  const int64_t second_computed = engine->runner().num_tokens_computed() - before - first_computed;
  const int64_t partial = prompt_len % block == 0 ? block : prompt_len % block;
  EXPECT_EQ(second_computed, partial) << "prompt " << prompt_len << ", block " << block;
  EXPECT_EQ(first[0].tokens, second[0].tokens);
  EXPECT_GT(engine->core().Stats().prefix_cache.hits, 0);
}

TEST(EngineTest, PrefixCachingRecomputesOnlyTheLastPartialBlockHybrid) {
  ExpectPrefixReuse(kTinyA, 100);
  ExpectPrefixReuse(kTinyA, 96);
}

TEST(EngineTest, PrefixCachingRecomputesOnlyTheLastPartialBlockFullAttention) {
  const char* home = std::getenv("HOME");
  const std::string smollm = std::string(home ? home : "") + "/.cache/ember/models/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!std::ifstream(smollm)) GTEST_SKIP() << "SmolLM2 not fetched (scripts/fetch_models.py)";
  ExpectPrefixReuse(smollm, 100);
}

TEST(EngineTest, SlidingGroupsHoldABoundedNumberOfBlocks) {
  EngineOptions o = Options();
  o.max_num_batched_tokens = 32;
  auto engine = MakeEngine(kTinyA, o);
  const kv::KvCacheConfig& config = engine->plan().kv;
  ASSERT_TRUE(engine->core().AddRequest(0, Input(Prompt(200, 3), 150)).ok());
  std::vector<int64_t> most_live(config.groups.size(), 0), last_live(config.groups.size(), 0);
  while (engine->core().HasUnfinished()) {
    engine->core().Step();
    if (!engine->core().scheduler().Find(0)) break;
    const kv::KvBlocks& blocks = engine->core().kv_cache().Blocks(0);
    for (size_t g = 0; g < config.groups.size(); ++g) {
      int64_t live = 0;
      for (kv::BlockId b : blocks.per_group[g]) live += b != kv::kNullBlock;
      most_live[g] = std::max(most_live[g], live);
      last_live[g] = live;
    }
  }
  for (size_t g = 0; g < config.groups.size(); ++g) {
    if (config.groups[g].kind == kv::AttentionKind::kFull) {
      EXPECT_GE(last_live[g], 340 / config.block_size) << "full group " << g << " keeps every block";
    } else {
      // Window 16 plus one 32-token chunk span at most 4 blocks of 16.
      EXPECT_LE(most_live[g], (config.groups[g].window + o.max_num_batched_tokens) / config.block_size + 2)
          << "sliding group " << g;
    }
  }
}

}  // namespace
}  // namespace ember
