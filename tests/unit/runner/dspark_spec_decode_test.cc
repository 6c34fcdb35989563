// DSpark end to end through LocalEngine: {"method":"dspark"} drafts from the target's tap hidden
// states that the runner hands the proposer, and every request's output (tokens, logprobs, finish
// reason) is bitwise the output without speculation, greedy and seeded-sampled, with chunked
// prefill, prefix caching and preemption in play. ember's forward is batch- and chunk-invariant and
// verification samples each position as plain decoding would, so equality is exact.
//
// Random drafters (written here for the target's shape) prove the plumbing and losslessness, their
// drafts mostly rejected; the drafters trained by scripts/train_dspark.py for SmolLM2 and for the
// tiny trained Muse Spark (tests/golden/dspark/smollm2, muse_tiny) prove that drafts get accepted
// as often through the engine as the torch reference measured on the same held-out prompts.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>

#include <nlohmann/json.hpp>

#include "model/causal_lm.h"
#include "runner/local_engine.h"
#include "support/engine_run.h"
#include "support/source_dir.h"
#include "unit/runner/local_engine_support.h"
#include "unit/spec/dspark_random_drafter.h"

namespace ember {
namespace {

using spec::dspark::test::RandomDrafterSpec;
using spec::dspark::test::TempDir;
using spec::dspark::test::WriteRandomDrafter;

using test::CachedModel;
using test::MakeEngine;
const std::string& kTinyA = test::kTinyMuseA;
// $EMBER_DSPARK_SMOLLM2 overrides it (a drafter being trained elsewhere).
std::string TrainedSmolLM2() {
  const char* dir = std::getenv("EMBER_DSPARK_SMOLLM2");
  return dir && *dir ? std::string(dir) : std::string(EMBER_SOURCE_DIR) + "/tests/golden/dspark/smollm2";
}

using test::ExpectBitwiseEqual;

// Random prompts of varied lengths; odd requests sample (seeded), so verification must be exact
// for sampling too.
std::vector<RequestInput> RandomWorkload(int32_t vocab, int num_requests, int max_tokens) {
  std::mt19937 rng(5);
  std::vector<RequestInput> inputs;
  for (int i = 0; i < num_requests; ++i) {
    RequestInput in;
    const int length = 5 + 7 * i;
    for (int t = 0; t < length; ++t) in.prompt_token_ids.push_back(static_cast<int32_t>(rng() % (vocab - 2)) + 1);
    in.sampling.max_tokens = max_tokens - (i % 3) * 2;
    in.sampling.logprobs = 2;
    in.sampling.ignore_eos = true;
    if (i % 2 == 1) {
      in.sampling.temperature = 0.8f;
      in.sampling.seed = 100 + i;
    }
    inputs.push_back(std::move(in));
  }
  return inputs;
}

std::string DSparkConfig(const std::string& dir, int k, const std::string& extra = "") {
  return R"({"method":"dspark","model":")" + dir + R"(","num_speculative_tokens":)" + std::to_string(k) + extra + "}";
}

struct Variant {
  std::string name;
  std::string config;
  bool tiny_pool = false;
};

// Runs `inputs` without speculation, then under each variant; compares bitwise. Returns the
// scheduler's counters of the last variant.
SpecDecodeCounters ExpectLossless(const std::string& path, const EngineOptions& base,
                                  const std::vector<RequestInput>& inputs, const std::vector<Variant>& variants) {
  std::map<RequestIndex, test::RunResult> want;
  int64_t tiny_pool = 0;
  {
    auto plain = MakeEngine(path, base);
    EXPECT_NE(plain, nullptr);
    if (plain == nullptr) return {};
    const auto start = std::chrono::steady_clock::now();
    want = test::RunToCompletion(plain->core(), inputs);
    if (std::getenv("EMBER_SPEC_TEST_VERBOSE")) {
      std::printf("no speculation: %.2f s\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    tiny_pool = kv::KvBytesPerSequence(plain->plan().kv, 96) + 4 * plain->plan().kv.BytesPerBlock();
  }
  SpecDecodeCounters last;
  for (const Variant& v : variants) {
    EngineOptions o = base;
    o.speculative_config = v.config;
    if (v.tiny_pool) {  // preemption mid-speculation: released requests restart from position 0
      o.kv_cache_memory_bytes = tiny_pool;
      o.max_model_len = 96;
      o.enable_prefix_caching = false;
    }
    auto engine = MakeEngine(path, o);
    EXPECT_NE(engine, nullptr) << v.name;
    if (engine == nullptr) continue;
    const auto start = std::chrono::steady_clock::now();
    std::map<RequestIndex, test::RunResult> got = test::RunToCompletion(engine->core(), inputs);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(got.size(), want.size()) << v.name;
    for (const auto& [req, r] : want) ExpectBitwiseEqual(r, got[req], v.name + ", request " + std::to_string(req));
    const SchedulerStats stats = engine->core().Stats();
    if (v.config.find(R"("adaptive":false)") != std::string::npos) {
      EXPECT_GT(stats.spec_decode.num_draft_tokens, 0) << v.name << ": nothing was verified, nothing was proven";
    }
    if (v.tiny_pool) {
      EXPECT_GT(stats.num_preemptions, 0) << v.name;
    }
    EXPECT_EQ(stats.kv_usage, 0.0) << v.name;
    if (std::getenv("EMBER_SPEC_TEST_VERBOSE")) std::printf("%s: %.2f s, drafts %lld draft tokens %lld accepted %lld\n", v.name.c_str(), seconds, (long long)stats.spec_decode.num_drafts, (long long)stats.spec_decode.num_draft_tokens, (long long)stats.spec_decode.num_accepted_tokens);
    last = stats.spec_decode;
  }
  return last;
}

// A random drafter for the tiny Muse Spark target (hidden 128, vocabulary 512, 6 layers): taps
// 1, 3 and 5 (the last, final-normed), layer 0 windowed over 6 context rows, blocks of 5.
RandomDrafterSpec MuseTinyDrafter() {
  RandomDrafterSpec s;
  s.hidden = 128;
  s.vocab = 512;
  s.target_layers = 6;
  s.taps = {1, 3, 5};
  s.sliding_window = 6;
  s.block_size = 5;
  return s;
}

// Muse Spark's hybrid MoE (sliding and full layers) with a random drafter tapping its last layer
// (whose tap is final-normed through CausalLM::ApplyFinalNorm), windowed layer 0.
TEST(DSparkSpecDecode, MuseSparkLossless) {
  TempDir tmp("muse_engine");
  WriteRandomDrafter(tmp.path, MuseTinyDrafter());
  const std::vector<RequestInput> inputs = RandomWorkload(512, 6, 20);
  ExpectLossless(kTinyA, test::SmallChunkedEngine(), inputs,
                 {{"dspark k=5 fixed", DSparkConfig(tmp.path, 5, R"(,"adaptive":false)")},
                  {"dspark k=3 fixed, threshold", DSparkConfig(tmp.path, 3, R"(,"adaptive":false,"draft_confidence_threshold":0.2)")},
                  {"dspark k=5 adaptive", DSparkConfig(tmp.path, 5, R"(,"enable_adaptive_verification":true)")},
                  {"dspark k=5 fixed, unquantized drafter", DSparkConfig(tmp.path, 5, R"(,"adaptive":false,"quantization":"none")")},
                  {"dspark k=4 fixed, tiny pool", DSparkConfig(tmp.path, 4, R"(,"adaptive":false)"), true}});
}

// Requests whose prompt prefix the target takes from its prefix cache: the runner reports their
// hidden states from the first uncached position, and the drafter restores its context before it
// from its own prefix cache (context_cache.h), filled by the first request. A drafter with a
// full-attention layer drafts for them too (without the cache it never could), as does one
// windowed on every layer; outputs stay bitwise.
class DSparkPrefixCacheTest : public ::testing::TestWithParam<bool> {};

TEST_P(DSparkPrefixCacheTest, CacheHitRequestsDraft) {
  TempDir tmp("muse_prefix");
  RandomDrafterSpec s = MuseTinyDrafter();
  s.window_all_layers = GetParam();
  WriteRandomDrafter(tmp.path, s);
  std::mt19937 rng(9);
  std::vector<int32_t> prefix(24);
  for (int32_t& t : prefix) t = static_cast<int32_t>(rng() % 500) + 1;
  auto request = [&](int tail, int seed) {
    RequestInput in;
    in.prompt_token_ids = prefix;
    for (int t = 0; t < tail; ++t) in.prompt_token_ids.push_back(static_cast<int32_t>((seed * 31 + t * 7) % 500) + 1);
    in.sampling.max_tokens = 12;
    in.sampling.logprobs = 1;
    in.sampling.ignore_eos = true;
    return in;
  };
  const std::vector<RequestInput> first = {request(5, 1)};
  const std::vector<RequestInput> hits = {request(9, 2), request(7, 3), request(12, 4)};

  auto run = [&](const std::string& config, SchedulerStats* after_first, SchedulerStats* after_hits) {
    EngineOptions o = test::SmallChunkedEngine();
    o.speculative_config = config;
    auto engine = MakeEngine(kTinyA, o);
    EXPECT_NE(engine, nullptr);
    auto a = test::RunToCompletion(engine->core(), first);
    *after_first = engine->core().Stats();
    // Keyed from 0 within each call: the second call's requests are 1.. here.
    for (const auto& [i, r] : test::RunToCompletion(engine->core(), hits, 1)) a[i + 1] = r;
    *after_hits = engine->core().Stats();
    return a;
  };
  SchedulerStats plain_a, plain_b, spec_a, spec_b;
  const auto want = run("", &plain_a, &plain_b);
  const auto got = run(DSparkConfig(tmp.path, 5, R"(,"adaptive":false)"), &spec_a, &spec_b);
  ASSERT_EQ(got.size(), 4u);
  for (const auto& [req, r] : want) ExpectBitwiseEqual(r, got.at(req), "request " + std::to_string(req));
  EXPECT_GE(spec_b.prefix_cache.hits - spec_a.prefix_cache.hits, 3 * 24) << "the prompts should hit the cache";
  // Each hit request samples 12 tokens with up to 5 drafted per step: at least 2 drafting steps.
  EXPECT_GE(spec_b.spec_decode.num_drafts - spec_a.spec_decode.num_drafts, 3 * 2) << "too few drafts for cache-hit requests";
}

INSTANTIATE_TEST_SUITE_P(Drafters, DSparkPrefixCacheTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "WindowedEverywhere" : "FullAttentionLayer"; });

// Bad DSpark configs are startup errors naming the problem.
TEST(DSparkSpecDecode, BadDrafterFailsAtStartup) {
  TempDir tmp("muse_bad");
  RandomDrafterSpec s;
  s.hidden = 128;
  s.vocab = 512;
  s.block_size = 5;
  WriteRandomDrafter(tmp.path, s);
  const std::string fixture = std::string(EMBER_SOURCE_DIR) + "/tests/golden/dspark/tiny";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {DSparkConfig("/nonexistent/dspark", 5), "/nonexistent/dspark"},
      {DSparkConfig(fixture, 5), "hidden_size is 64 but the target's is 128"},
      {DSparkConfig(tmp.path, 6), "num_speculative_tokens is 6"},
      {DSparkConfig(tmp.path, 5, R"(,"rejection_sample_method":"block")"), "rejection_sample_method"},
      {DSparkConfig(tmp.path, 5, R"(,"draft_vocab_size":100)"), "ships no draft_vocab.json"},
  };
  test::ExpectStartupErrors(cases);
}

// SmolLM2 (a Llama GGUF: quantized embedding and tied lm_head shared with the drafter).
TEST(DSparkSpecDecode, SmolLM2RandomDrafterLossless) {
  const std::string path = CachedModel("SmolLM2-135M-Instruct.Q4_1.gguf");
  if (!std::ifstream(path)) GTEST_SKIP() << "SmolLM2 not fetched (scripts/fetch_models.py)";
  TempDir tmp("smollm2_random");
  RandomDrafterSpec s;
  s.hidden = 576;
  s.vocab = 49152;
  s.target_layers = 30;
  s.taps = {2, 15, 29};
  s.layers = 1;
  s.heads = 9;
  s.kv_heads = 3;
  s.head_dim = 64;
  s.intermediate = 256;
  s.block_size = 4;
  s.markov_rank = 8;
  WriteRandomDrafter(tmp.path, s);
  EngineOptions o = test::SmallChunkedEngine();
  o.kv_cache_dtype = "auto";
  ExpectLossless(path, o, RandomWorkload(49152, 3, 12),
                 {{"dspark k=4 fixed", DSparkConfig(tmp.path, 4, R"(,"adaptive":false)")}});
}

// Gemma 3 (embedding scaled by sqrt(hidden) in its embedding module, which the drafter's block
// rows go through too; softcapped logits; a 262k vocabulary).
TEST(DSparkSpecDecode, Gemma3RandomDrafterLossless) {
  const std::string path = CachedModel("gemma-3-270m-q4_k_m.gguf");
  if (!std::ifstream(path)) GTEST_SKIP() << "Gemma 3 not fetched (scripts/fetch_models.py)";
  auto model = LoadModel(path);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const ModelInfo info = (*model)->info();
  model->reset();
  TempDir tmp("gemma3_random");
  RandomDrafterSpec s;
  s.hidden = info.hidden_size;
  s.vocab = info.vocab_size;
  s.target_layers = info.num_layers;
  s.taps = {3, static_cast<int32_t>(info.num_layers / 2), static_cast<int32_t>(info.num_layers - 1)};
  s.layers = 1;
  s.heads = 4;
  s.kv_heads = 2;
  s.head_dim = 64;
  s.intermediate = 256;
  s.block_size = 4;
  s.markov_rank = 4;
  WriteRandomDrafter(tmp.path, s);
  EngineOptions o = test::SmallChunkedEngine();
  o.kv_cache_dtype = "auto";
  ExpectLossless(path, o, RandomWorkload(static_cast<int32_t>(info.vocab_size), 3, 10),
                 {{"dspark k=4 fixed", DSparkConfig(tmp.path, 4, R"(,"adaptive":false)")}});
}

// A drafter trained by scripts/train_dspark.py, on the held-out prompts it was measured on
// (eval_prompts.json: the test split's prompts, the target's greedy answer lengths, and the tokens
// per cycle the torch reference measured on exactly those: live decoding for SmolLM2, the walk over
// the stored greedy answers for the tiny Muse). Greedy through the engine with 7 draft
// tokens always verified, the outputs are bitwise those without speculation and the tokens per
// verification step (1 + accepted per step) are the walk's within `tolerance` (relative): the
// engine's drafter, taps and verification do what the torch reference does. Then a few prompts
// sampled at T=1 (seeded) are lossless too, adaptive and fixed (greedy drafts, verified one-hot:
// bitwise; probabilistic drafts are lossless in distribution, spec_decode_distribution_test).
// `extra` adds speculative-config fields (a quantized drafter must reach the same rate).
void ExpectTrainedDrafterMatchesItsReport(const std::string& target, const std::string& drafter, double tolerance,
                                          const std::string& extra = "") {
  std::ifstream file(drafter + "/eval_prompts.json");
  ASSERT_TRUE(file) << drafter << "/eval_prompts.json is missing: rerun scripts/train_dspark.py calibrate";
  const nlohmann::json eval = nlohmann::json::parse(file);
  std::vector<RequestInput> greedy;
  int32_t longest = 0;
#ifdef EMBER_SANITIZED
  // Sanitized builds run ~10x slower: four prompts, 32 tokens each, prove losslessness; the rate
  // needs all of them, whole.
  const size_t num_prompts = std::min<size_t>(4, eval["prompts"].size());
  constexpr bool kCompareRate = false;
  constexpr int32_t kMaxTokens = 32;
#else
  const size_t num_prompts = eval["prompts"].size();
  constexpr bool kCompareRate = true;
  constexpr int32_t kMaxTokens = 1 << 20;
#endif
  for (size_t i = 0; i < num_prompts; ++i) {
    RequestInput in;
    in.prompt_token_ids = eval["prompts"][i].get<std::vector<int32_t>>();
    in.sampling.max_tokens = std::min(kMaxTokens, eval["max_tokens"][i].get<int32_t>());
    in.sampling.temperature = 0.0f;
    in.sampling.logprobs = 1;
    in.sampling.ignore_eos = true;  // the answers end with their end-of-turn token
    longest = std::max<int32_t>(longest, static_cast<int32_t>(in.prompt_token_ids.size()) + in.sampling.max_tokens);
    greedy.push_back(std::move(in));
  }
  EngineOptions o = test::SmallChunkedEngine();
  o.kv_cache_dtype = "auto";
  o.max_model_len = (longest + 16 + 7) / 8 * 8;
  o.max_num_seqs = static_cast<int32_t>(greedy.size());
  o.max_num_batched_tokens = 256;
  o.kv_cache_memory_bytes = 256 << 20;
  const SpecDecodeCounters c =
      ExpectLossless(target, o, greedy, {{"dspark k=7 fixed, greedy", DSparkConfig(drafter, 7, R"(,"adaptive":false)" + extra)}});
  ASSERT_GT(c.num_drafts, 0);
  const double tokens_per_step = 1.0 + static_cast<double>(c.num_accepted_tokens) / c.num_drafts;
  const double reference = eval["tokens_per_cycle_T0"].get<double>();
  std::printf("%s: %zu held-out prompts, greedy, k=7 fixed: %.2f tokens per verification step (torch, %s: %.2f); "
              "accepted per position:",
              drafter.c_str(), greedy.size(), tokens_per_step, eval.value("reference", "").c_str(), reference);
  for (int64_t n : c.accepted_per_position) std::printf(" %.2f", static_cast<double>(n) / c.num_drafts);
  std::printf("\n");
  if (kCompareRate) {
    EXPECT_NEAR(tokens_per_step, reference, tolerance * reference);
  }

  std::vector<RequestInput> sampled(greedy.begin(), greedy.begin() + std::min<size_t>(3, greedy.size()));
  for (size_t i = 0; i < sampled.size(); ++i) {
    sampled[i].sampling.temperature = 1.0f;
    sampled[i].sampling.seed = 7 + static_cast<int64_t>(i);
  }
  const SpecDecodeCounters t1 = ExpectLossless(
      target, o, sampled,
      {{"dspark k=7 adaptive, T=1", DSparkConfig(drafter, 7, R"(,"enable_adaptive_verification":true)")},
       {"dspark k=7 fixed, T=1", DSparkConfig(drafter, 7, R"(,"adaptive":false)")}});
  EXPECT_GT(t1.num_accepted_tokens, 0) << "no sampled draft was accepted";
}

// SmolLM2 (ember's Q4_1 kernels against transformers' dequantized f32 forward: the taps differ in
// their last bits and a greedy answer can part at a near-tie, after which drafts are judged on
// another text; the torch reference itself gives 2.35 over its stored answers and 2.37 live, hence 15%).
TEST(DSparkSpecDecode, SmolLM2TrainedDrafter) {
  const std::string path = CachedModel("SmolLM2-135M-Instruct.Q4_1.gguf");
  if (!std::ifstream(path)) GTEST_SKIP() << "SmolLM2 not fetched (scripts/fetch_models.py)";
  const std::string drafter = TrainedSmolLM2();
  if (!std::ifstream(drafter + "/model.safetensors")) GTEST_SKIP() << "no trained drafter in " << drafter;
  ExpectTrainedDrafterMatchesItsReport(path, drafter, 0.15);
}

// The same with the drafter's own weights ("quantization": "none", what the torch module computes;
// the test above runs the default Q8_0 matmuls): both reach torch's rate within the bound, so
// quantizing costs no measurable acceptance (1.98 tokens per step both ways with session 26's drafter,
// 2.10 and 2.09 with session 33's, 2.34 and 2.32 with session 34's, 2.47 and 2.47 with session 40's).
TEST(DSparkSpecDecode, SmolLM2TrainedDrafterUnquantized) {
  const std::string path = CachedModel("SmolLM2-135M-Instruct.Q4_1.gguf");
  if (!std::ifstream(path)) GTEST_SKIP() << "SmolLM2 not fetched (scripts/fetch_models.py)";
  const std::string drafter = TrainedSmolLM2();
  if (!std::ifstream(drafter + "/model.safetensors")) GTEST_SKIP() << "no trained drafter in " << drafter;
  ExpectTrainedDrafterMatchesItsReport(path, drafter, 0.15, R"(,"quantization":"none")");
}

// The tiny trained Muse Spark (tests/golden/quant/accuracy: sliding and full attention, MoE,
// softcapped logits) with its drafter: taps 0, 2 and the final-normed 3, raw embedding rows (no
// embedding norm), logit_scale = the target's output multiplier. bf16 weights on both sides.
TEST(DSparkSpecDecode, MuseSparkTrainedDrafter) {
  const std::string target = std::string(EMBER_SOURCE_DIR) + "/tests/golden/quant/accuracy/model";
  const std::string drafter = std::string(EMBER_SOURCE_DIR) + "/tests/golden/dspark/muse_tiny";
  if (!std::ifstream(drafter + "/model.safetensors")) GTEST_SKIP() << "no trained drafter in " << drafter;
  ExpectTrainedDrafterMatchesItsReport(target, drafter, 0.10);
}

}  // namespace
}  // namespace ember
