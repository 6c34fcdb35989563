// Prompt logprobs (SamplingParams::prompt_logprobs) through the whole engine on the tiny Muse
// Spark checkpoint: every prompt position scored with the sampler's log-softmax, bitwise equal to
// scoring the logits of a direct forward, however the prompt is chunked and whatever shares its
// batch; and such a request takes no prefix-cache hit, so no position is left unscored.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <random>

#include "model/causal_lm.h"
#include "runner/local_engine.h"
#include "runner/sampler/logprobs.h"
#include "support/single_sequence.h"
#include "support/source_dir.h"

namespace ember {
namespace {

const std::string kTinyA = std::string(EMBER_SOURCE_DIR) + "/tests/golden/muse_spark/tiny_a";

std::vector<int32_t> Prompt(int length, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> ids(length);
  for (int32_t& id : ids) id = static_cast<int32_t>(rng() % 500) + 1;
  return ids;
}

// The reference: all-position logits of one direct forward, each scored at the next prompt token.
std::vector<TokenLogprobs> DirectPromptLogprobs(const std::vector<int32_t>& prompt, int32_t num_top) {
  auto model = LoadModel(kTinyA);
  EXPECT_TRUE(model.ok()) << model.status().message();
  auto sequence = test::SingleSequence::Create(model->get(), static_cast<int64_t>(prompt.size()), kv::KvDtype::kF32);
  EXPECT_TRUE(sequence.ok()) << sequence.status().message();
  std::vector<float> logits;
  EXPECT_TRUE(sequence->Append(prompt.data(), static_cast<int64_t>(prompt.size()), true, &logits).ok());
  const size_t vocab = logits.size() / prompt.size();
  std::vector<TokenLogprobs> out;
  for (size_t i = 0; i + 1 < prompt.size(); ++i) {
    out.push_back(ComputeTokenLogprobs(std::span<const float>(logits).subspan(i * vocab, vocab), prompt[i + 1], num_top));
  }
  return out;
}

struct Outcome {
  std::vector<TokenLogprobs> prompt_logprobs;
  int64_t cached_tokens = -1;
};

std::unique_ptr<LocalEngine> MakeEngine(const EngineOptions& options) {
  auto model = LoadModel(kTinyA);
  EXPECT_TRUE(model.ok()) << model.status().message();
  auto engine = LocalEngine::Create(std::move(*model), options);
  EXPECT_TRUE(engine.ok()) << engine.status().message();
  return std::move(*engine);
}

// Runs `inputs` together to the end; returns the outcome of each, by submission order.
std::vector<Outcome> RunTogether(EngineClient& client, std::vector<RequestInput> inputs) {
  std::map<RequestIndex, size_t> order;
  for (RequestInput& input : inputs) order.emplace(client.Submit(std::move(input)), order.size());
  std::vector<Outcome> outcomes(inputs.size());
  while (client.HasUnfinished()) {
    for (RequestOutput& out : client.Step()) {
      Outcome& o = outcomes[order.at(out.req)];
      EXPECT_TRUE(out.prompt_logprobs.empty() || o.prompt_logprobs.empty()) << "prompt logprobs handed out twice";
      o.prompt_logprobs.insert(o.prompt_logprobs.end(), out.prompt_logprobs.begin(), out.prompt_logprobs.end());
      EXPECT_NE(out.finish_reason, FinishReason::kError) << out.error;
      if (out.finished) o.cached_tokens = out.num_cached_tokens;
    }
  }
  return outcomes;
}

EngineOptions Options(int64_t max_num_batched_tokens) {
  EngineOptions o;
  o.kv_cache_dtype = "f32";
  o.max_model_len = 512;
  o.max_num_seqs = 4;
  o.max_num_batched_tokens = max_num_batched_tokens;
  o.kv_cache_memory_bytes = 64 << 20;
  return o;
}

RequestInput Input(std::vector<int32_t> prompt, std::optional<int32_t> prompt_logprobs) {
  RequestInput in;
  in.prompt_token_ids = std::move(prompt);
  in.sampling.temperature = 0;
  in.sampling.max_tokens = 3;
  in.sampling.ignore_eos = true;
  in.sampling.prompt_logprobs = prompt_logprobs;
  return in;
}

void ExpectBitwiseEqual(const std::vector<TokenLogprobs>& got, const std::vector<TokenLogprobs>& want,
                        const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].logprob, want[i].logprob) << what << " entry " << i;
    EXPECT_EQ(got[i].top_ids, want[i].top_ids) << what << " entry " << i;
    EXPECT_EQ(got[i].top_logprobs, want[i].top_logprobs) << what << " entry " << i;
  }
}

TEST(PromptLogprobsTest, EqualScoringADirectForwardWhateverTheChunksAndBatch) {
  const std::vector<int32_t> prompt = Prompt(150, 7);
  const std::vector<TokenLogprobs> want = DirectPromptLogprobs(prompt, 2);
  ASSERT_EQ(want.size(), prompt.size() - 1);
  // One step for the whole prompt, then 64-token chunks beside a second request.
  auto whole = MakeEngine(Options(2048));
  ExpectBitwiseEqual(RunTogether(whole->client(), {Input(prompt, 2)})[0].prompt_logprobs, want, "alone, one step");
  auto chunked = MakeEngine(Options(64));
  const std::vector<Outcome> batched = RunTogether(chunked->client(), {Input(Prompt(40, 3), std::nullopt), Input(prompt, 2)});
  EXPECT_TRUE(batched[0].prompt_logprobs.empty());
  ExpectBitwiseEqual(batched[1].prompt_logprobs, want, "chunked and batched");
}

TEST(PromptLogprobsTest, ARequestWithPromptLogprobsTakesNoCacheHit) {
  const std::vector<int32_t> prompt = Prompt(100, 9);
  // The first request fills the prefix cache with this prompt's blocks: a plain repeat hits it, a
  // repeat asking for prompt logprobs computes every position anyway.
  auto engine = MakeEngine(Options(2048));
  RunTogether(engine->client(), {Input(prompt, std::nullopt)});
  EXPECT_GT(RunTogether(engine->client(), {Input(prompt, std::nullopt)})[0].cached_tokens, 0);
  const Outcome scored = RunTogether(engine->client(), {Input(prompt, 0)})[0];
  EXPECT_EQ(scored.cached_tokens, 0);
  EXPECT_EQ(scored.prompt_logprobs.size(), prompt.size() - 1);
}

}  // namespace
}  // namespace ember
