// Speculative decoding end to end (scheduler, KV rollback, runner verification, every proposer)
// on real models: the output of every request, tokens and logprobs, is bitwise the output without
// speculation, with chunked prefill, prefix caching, preemption and stop tokens in play. ember's
// forward is batch- and chunk-invariant and verification samples each position exactly as plain
// decoding would, so equality is exact, not a tolerance.
#include <gtest/gtest.h>

#include <cstdlib>
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

using test::CachedModel;
using test::MakeEngine;
const std::string& kTinyA = test::kTinyMuseA;

using Result = test::RunResult;

std::map<RequestIndex, Result> RunAll(LocalEngine& engine, const std::vector<RequestInput>& inputs) {
  return test::RunToCompletion(engine.core(), inputs);
}

using test::ExpectBitwiseEqual;

// Prompts that repeat a random segment, so lookups find continuations; a shared prefix between
// some of them, so prefix caching takes hits.
std::vector<int32_t> RepetitivePrompt(int segment, int repeats, int tail, uint32_t seed, int32_t vocab) {
  std::mt19937 rng(seed);
  std::vector<int32_t> seg(segment);
  for (int32_t& t : seg) t = static_cast<int32_t>(rng() % std::min(vocab - 1, 500)) + 1;
  std::vector<int32_t> p;
  for (int r = 0; r < repeats; ++r) p.insert(p.end(), seg.begin(), seg.end());
  p.insert(p.end(), seg.begin(), seg.begin() + tail);
  return p;
}

std::vector<RequestInput> Workload(int32_t vocab, int num_requests, int max_tokens) {
  std::vector<RequestInput> inputs;
  for (int i = 0; i < num_requests; ++i) {
    RequestInput in;
    in.prompt_token_ids = RepetitivePrompt(6 + i % 5, 3 + i % 3, i % 4, 10 + (i % 3 == 2 ? 0 : i), vocab);
    in.sampling.max_tokens = max_tokens - (i % 3) * 3;
    in.sampling.logprobs = 2;
    if (i % 2 == 1) {  // seeded sampling: verification must be exact for it too
      in.sampling.temperature = 0.8f;
      in.sampling.top_p = 0.95f;
      in.sampling.seed = 1000 + i;
    }
    in.sampling.ignore_eos = true;
    inputs.push_back(std::move(in));
  }
  return inputs;
}

struct SpecVariant {
  std::string name;
  std::string config;  // --speculative-config; the draft model path is filled in
};

std::vector<SpecVariant> Variants(const std::string& model_path) {
  return {
      {"ngram k=4 fixed", R"({"method":"ngram","num_speculative_tokens":4,"prompt_lookup_min":1,"adaptive":false})"},
      {"ngram k=7 adaptive", R"({"method":"ngram","num_speculative_tokens":7,"prompt_lookup_max":3})"},
      {"suffix k=5 fixed", R"({"method":"suffix","num_speculative_tokens":5,"adaptive":false})"},
      {"draft_model (itself) k=3 fixed",
       R"({"method":"draft_model","num_speculative_tokens":3,"adaptive":false,"model":")" + model_path + R"("})"},
  };
}

// Runs the workload without speculation, then under every variant and under variants that also
// force preemption (a pool for a few sequences) and turn prefix caching off; compares bitwise.
// `lookups_pay`: the model copies repeated text (a trained model's induction), so lookup drafts
// get accepted; a random-weight fixture's output does not repeat, so there only the draft model
// (the model itself) is accepted, and the lookups prove rejection and rollback.
void ExpectLossless(const std::string& path, EngineOptions base, int num_requests, int max_tokens,
                    bool expect_stops, bool lookups_pay) {
  auto plain = MakeEngine(path, base);
  ASSERT_NE(plain, nullptr);
  const int32_t vocab = static_cast<int32_t>(plain->model().info().vocab_size);
  std::vector<RequestInput> inputs = Workload(vocab, num_requests, max_tokens);
  // Stop tokens: a greedy request stops at a token its plain output emits mid-way.
  if (expect_stops) {
    const std::map<RequestIndex, Result> first = RunAll(*plain, inputs);
    const std::vector<int32_t>& out0 = first.at(0).tokens;
    ASSERT_GE(out0.size(), 6u);
    inputs[0].sampling.stop_token_ids = {out0[5]};
  }
  plain.reset();  // request indices are per engine: the reference runs on a fresh one
  auto fresh = MakeEngine(path, base);
  std::map<RequestIndex, Result> want = RunAll(*fresh, inputs);
  // A pool for one full-length sequence (and a few blocks): running several at once preempts.
  constexpr int64_t kTinyPoolLen = 96;
  const int64_t tiny_pool = kv::KvBytesPerSequence(fresh->plan().kv, kTinyPoolLen) + 4 * fresh->plan().kv.BytesPerBlock();
  fresh.reset();
  if (std::getenv("EMBER_SPEC_TEST_VERBOSE")) {
    for (const auto& [req, r] : want) {
      std::string line;
      for (int32_t t : r.tokens) line += std::to_string(t) + " ";
      std::printf("request %d: %s\n", static_cast<int>(req), line.c_str());
    }
  }
  if (expect_stops) {
    EXPECT_EQ(want[0].reason, FinishReason::kStop);
  }

  std::vector<SpecVariant> variants = Variants(path);
#ifdef EMBER_SANITIZED
  // Under the sanitizers the real models check memory and threads on one variant; the fixture
  // keeps all of them (the release suite runs everything).
  if (lookups_pay) variants.resize(1);
#endif
  for (const SpecVariant& v : variants) {
    // The tiny-pool run for every variant on the fixture; on the (slower) real models for the
    // first variant only, which keeps the suite short under the sanitizers.
    const int modes = (!lookups_pay || &v == &variants.front()) ? 2 : 1;
    for (int mode = 0; mode < modes; ++mode) {
      EngineOptions o = base;
      o.speculative_config = v.config;
      std::string what = path + ", " + v.name;
      if (mode == 1) {
        o.kv_cache_memory_bytes = tiny_pool;  // preemption mid-speculation
        o.max_model_len = kTinyPoolLen;
        o.enable_prefix_caching = false;
        what += ", tiny pool, no prefix caching";
      }
      auto engine = MakeEngine(path, o);
      ASSERT_NE(engine, nullptr) << what;
      std::map<RequestIndex, Result> got = RunAll(*engine, inputs);
      ASSERT_EQ(got.size(), want.size()) << what;
      for (const auto& [req, r] : want) ExpectBitwiseEqual(r, got[req], what + ", request " + std::to_string(req));
      const SchedulerStats stats = engine->core().Stats();
      // Adaptive speculation rightly verifies nothing where drafts never match.
      if (lookups_pay || v.config.find(R"("adaptive":false)") != std::string::npos) {
        EXPECT_GT(stats.spec_decode.num_draft_tokens, 0) << what << ": nothing was verified, nothing was proven";
      }
      if (lookups_pay || v.name.starts_with("draft_model")) {
        EXPECT_GT(stats.spec_decode.num_accepted_tokens, 0) << what << ": nothing was accepted";
      }
      // Every verified draft is counted once under its verified length.
      int64_t drafts = 0, draft_tokens = 0;
      for (size_t i = 0; i < stats.spec_decode.drafts_per_length.size(); ++i) {
        drafts += stats.spec_decode.drafts_per_length[i];
        draft_tokens += static_cast<int64_t>(i + 1) * stats.spec_decode.drafts_per_length[i];
      }
      EXPECT_EQ(drafts, stats.spec_decode.num_drafts) << what;
      EXPECT_EQ(draft_tokens, stats.spec_decode.num_draft_tokens) << what;
      if (mode == 1) {
        EXPECT_GT(stats.num_preemptions, 0) << what;
      }
      EXPECT_EQ(stats.kv_usage, 0.0) << what;
    }
  }
}

TEST(SpecDecodeLossless, MuseSparkHybridMoe) { ExpectLossless(kTinyA, test::SmallChunkedEngine(), 8, 24, true, false); }

TEST(SpecDecodeLossless, SmolLM2) {
  const std::string path = CachedModel("SmolLM2-135M-Instruct.Q4_1.gguf");
  if (!std::ifstream(path)) GTEST_SKIP() << "SmolLM2 not fetched (scripts/fetch_models.py)";
  EngineOptions o = test::SmallChunkedEngine();
  o.kv_cache_dtype = "auto";
  ExpectLossless(path, o, 4, 16, false, true);
}

TEST(SpecDecodeLossless, Gemma3) {
  const std::string path = CachedModel("gemma-3-270m-q4_k_m.gguf");
  if (!std::ifstream(path)) GTEST_SKIP() << "Gemma 3 not fetched (scripts/fetch_models.py)";
  EngineOptions o = test::SmallChunkedEngine();
  o.kv_cache_dtype = "auto";
  ExpectLossless(path, o, 4, 16, false, true);
}

// Bad configurations are startup errors that name the problem.
TEST(SpecDecodeConfig, BadConfigsFailAtStartup) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"method":"ngram"})", "num_speculative_tokens"},
      {R"({"method":"ngram","num_speculative_tokens":99})", "num_speculative_tokens"},
      {"{not json", "not a JSON object"},
      {R"({"method":"draft_model","num_speculative_tokens":2,"model":"/nonexistent/draft.gguf"})", "/nonexistent"},
      {R"({"method":"draft_model","num_speculative_tokens":2,"model":")" + std::string(EMBER_SOURCE_DIR) +
           R"(/tests/golden/muse_spark/tiny_b"})",
       "vocab_size"},
  };
  test::ExpectStartupErrors(cases);
}

}  // namespace
}  // namespace ember
