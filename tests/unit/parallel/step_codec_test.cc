// The WorkerStep codec: every field survives a round trip, and bytes from another process that
// are truncated or corrupted give an error (or, when a corruption happens to be well formed,
// a step that encodes back to the same bytes), never a crash.
#include "parallel/step_codec.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>

#include "unit/engine/any_token.h"

namespace ember::parallel {
namespace {

// A constraint's presence is all that matters here (it is not encoded).
using test::AnyToken;

SamplingParams NonDefaultSampling(int salt) {
  SamplingParams p;
  p.n = 3 + salt;
  p.temperature = 0.7f;
  p.top_p = 0.9f;
  p.top_k = 40;
  p.min_p = 0.05f;
  p.presence_penalty = -1.5f;
  p.frequency_penalty = 0.25f;
  p.repetition_penalty = 1.1f;
  p.seed = 0xfedcba9876543210ull + static_cast<uint64_t>(salt);
  p.max_tokens = 512;
  p.min_tokens = 4;
  p.ignore_eos = true;
  p.stop_token_ids = {2, 7, -1};
  p.stop = {"\n\n", "", std::string("a\0b", 3), "</s>"};
  p.include_stop_str_in_output = true;
  p.logprobs = 5;
  p.prompt_logprobs = 0;  // present but zero: not the same as absent
  p.constraint = std::make_shared<AnyToken>();
  return p;
}

WorkerStep FullStep() {
  WorkerStep step;
  SchedulerOutput& o = step.output;
  o.step_id = 0x0123456789abcdefull;
  NewRequestData a;
  a.req = 11;
  a.prompt_token_ids = {1, 2, 3, std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::min()};
  a.output_token_ids = {9, 8};
  a.sampling = NonDefaultSampling(0);
  a.eos_token_id = 151645;
  a.block_ids.per_group = {{4, 5, 6}, {}, {0, 7}};
  a.num_computed_tokens = 32;
  a.cache_salt_key = 0xdeadbeefcafef00dull;
  NewRequestData b;  // defaults, but a logprobs-free sampling with a NaN temperature's bits
  b.req = std::numeric_limits<uint64_t>::max();
  b.sampling.temperature = std::bit_cast<float>(0x7fc00123u);
  o.new_reqs = {a, b};
  CachedRequestData c;
  c.req = 12;
  c.new_block_ids.per_group = {{8}, {9, 10}};
  c.num_computed_tokens = -1;
  c.num_kept_blocks = {3, 1};
  o.cached_reqs = {c, CachedRequestData{}};
  o.scheduled_reqs = {11, 12, 13};
  o.num_scheduled_tokens = {37, 1, 4};
  o.total_num_scheduled_tokens = 42;
  o.scheduled_spec_tokens = {{}, {}, {100, 101, 102}};
  o.num_tokens_to_propose = {0, 2, 3};
  o.finished_reqs = {5, 6};
  o.preempted_reqs = {7};
  step.sampled_reqs = {12, 13};
  step.sampled_token_ids = {{17}, {}};
  return step;
}

void ExpectSameSampling(const SamplingParams& got, const SamplingParams& want) {
  EXPECT_EQ(got.n, want.n);
  EXPECT_EQ(std::bit_cast<uint32_t>(got.temperature), std::bit_cast<uint32_t>(want.temperature));
  EXPECT_EQ(got.top_p, want.top_p);
  EXPECT_EQ(got.top_k, want.top_k);
  EXPECT_EQ(got.min_p, want.min_p);
  EXPECT_EQ(got.presence_penalty, want.presence_penalty);
  EXPECT_EQ(got.frequency_penalty, want.frequency_penalty);
  EXPECT_EQ(got.repetition_penalty, want.repetition_penalty);
  EXPECT_EQ(got.seed, want.seed);
  EXPECT_EQ(got.max_tokens, want.max_tokens);
  EXPECT_EQ(got.min_tokens, want.min_tokens);
  EXPECT_EQ(got.ignore_eos, want.ignore_eos);
  EXPECT_EQ(got.stop_token_ids, want.stop_token_ids);
  EXPECT_EQ(got.stop, want.stop);
  EXPECT_EQ(got.include_stop_str_in_output, want.include_stop_str_in_output);
  EXPECT_EQ(got.logprobs, want.logprobs);
  EXPECT_EQ(got.prompt_logprobs, want.prompt_logprobs);
  EXPECT_EQ(got.constraint, nullptr);  // never encoded: workers do not sample
}

void ExpectSameStep(const WorkerStep& got, const WorkerStep& want) {
  EXPECT_EQ(got.shutdown, want.shutdown);
  EXPECT_EQ(got.forward_without_tokens, want.forward_without_tokens);
  const SchedulerOutput& g = got.output;
  const SchedulerOutput& w = want.output;
  EXPECT_EQ(g.step_id, w.step_id);
  ASSERT_EQ(g.new_reqs.size(), w.new_reqs.size());
  for (size_t i = 0; i < w.new_reqs.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(g.new_reqs[i].req, w.new_reqs[i].req);
    EXPECT_EQ(g.new_reqs[i].prompt_token_ids, w.new_reqs[i].prompt_token_ids);
    EXPECT_EQ(g.new_reqs[i].output_token_ids, w.new_reqs[i].output_token_ids);
    ExpectSameSampling(g.new_reqs[i].sampling, w.new_reqs[i].sampling);
    EXPECT_EQ(g.new_reqs[i].eos_token_id, w.new_reqs[i].eos_token_id);
    EXPECT_EQ(g.new_reqs[i].block_ids.per_group, w.new_reqs[i].block_ids.per_group);
    EXPECT_EQ(g.new_reqs[i].num_computed_tokens, w.new_reqs[i].num_computed_tokens);
    EXPECT_EQ(g.new_reqs[i].cache_salt_key, w.new_reqs[i].cache_salt_key);
  }
  ASSERT_EQ(g.cached_reqs.size(), w.cached_reqs.size());
  for (size_t i = 0; i < w.cached_reqs.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(g.cached_reqs[i].req, w.cached_reqs[i].req);
    EXPECT_EQ(g.cached_reqs[i].new_block_ids.per_group, w.cached_reqs[i].new_block_ids.per_group);
    EXPECT_EQ(g.cached_reqs[i].num_computed_tokens, w.cached_reqs[i].num_computed_tokens);
    EXPECT_EQ(g.cached_reqs[i].num_kept_blocks, w.cached_reqs[i].num_kept_blocks);
  }
  EXPECT_EQ(g.scheduled_reqs, w.scheduled_reqs);
  EXPECT_EQ(g.num_scheduled_tokens, w.num_scheduled_tokens);
  EXPECT_EQ(g.total_num_scheduled_tokens, w.total_num_scheduled_tokens);
  EXPECT_EQ(g.scheduled_spec_tokens, w.scheduled_spec_tokens);
  EXPECT_EQ(g.num_tokens_to_propose, w.num_tokens_to_propose);
  EXPECT_EQ(g.finished_reqs, w.finished_reqs);
  EXPECT_EQ(g.preempted_reqs, w.preempted_reqs);
  EXPECT_EQ(got.sampled_reqs, want.sampled_reqs);
  EXPECT_EQ(got.sampled_token_ids, want.sampled_token_ids);
}

TEST(StepCodecTest, EveryFieldRoundTrips) {
  const WorkerStep step = FullStep();
  const std::vector<uint8_t> bytes = EncodeWorkerStep(step);
  auto decoded = DecodeWorkerStep(bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  ExpectSameStep(*decoded, step);
  EXPECT_EQ(EncodeWorkerStep(*decoded), bytes);
}

TEST(StepCodecTest, ForwardWithoutTokensRoundTrips) {
  WorkerStep step;
  step.forward_without_tokens = true;
  auto decoded = DecodeWorkerStep(EncodeWorkerStep(step));
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_TRUE(decoded->forward_without_tokens);
}

ModelRunnerOutput FullRunnerOutput() {
  ModelRunnerOutput o;
  o.step_id = 77;
  o.reqs = {3, 9};
  o.sampled_token_ids = {{5}, {}};
  o.logprobs = {{TokenLogprobs{.logprob = -0.25f, .top_ids = {5, 6}, .top_logprobs = {-0.25f, -1.5f}}}, {}};
  o.prompt_logprobs = {{}, {TokenLogprobs{.logprob = -3.0f, .top_ids = {1}, .top_logprobs = {-0.5f}},
                            TokenLogprobs{.logprob = std::bit_cast<float>(0x7fc00001u), .top_ids = {}, .top_logprobs = {}}}};
  o.draft_token_ids = {{1, 2}, {}};
  o.draft_confidences = {{0.5f, 0.25f}, {}};
  o.propose_seconds = 0.125;
  o.propose_catch_up_seconds = 0.0625;
  o.hidden_states_seconds = 0.03125;
  o.execute_seconds = 1.5;
  return o;
}

TEST(StepCodecTest, RunnerOutputRoundTripsBitForBit) {
  const ModelRunnerOutput o = FullRunnerOutput();
  const std::vector<uint8_t> bytes = EncodeRunnerOutput(o);
  auto decoded = DecodeRunnerOutput(bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(decoded->step_id, o.step_id);
  EXPECT_EQ(decoded->reqs, o.reqs);
  EXPECT_EQ(decoded->sampled_token_ids, o.sampled_token_ids);
  ASSERT_EQ(decoded->logprobs.size(), 2u);
  EXPECT_EQ(decoded->logprobs[0][0].top_ids, o.logprobs[0][0].top_ids);
  EXPECT_EQ(decoded->logprobs[0][0].top_logprobs, o.logprobs[0][0].top_logprobs);
  EXPECT_EQ(decoded->prompt_logprobs[1].size(), 2u);
  EXPECT_EQ(decoded->draft_token_ids, o.draft_token_ids);
  EXPECT_EQ(decoded->draft_confidences, o.draft_confidences);
  EXPECT_EQ(decoded->propose_seconds, o.propose_seconds);
  EXPECT_EQ(decoded->propose_catch_up_seconds, o.propose_catch_up_seconds);
  EXPECT_EQ(decoded->hidden_states_seconds, o.hidden_states_seconds);
  EXPECT_EQ(decoded->execute_seconds, o.execute_seconds);
  EXPECT_EQ(EncodeRunnerOutput(*decoded), bytes);  // NaN payloads included
}

TEST(StepCodecTest, RunnerOutputTruncationsAndBadListsAreErrors) {
  const std::vector<uint8_t> bytes = EncodeRunnerOutput(FullRunnerOutput());
  for (size_t n = 0; n < bytes.size(); ++n) {
    ASSERT_FALSE(DecodeRunnerOutput(std::span<const uint8_t>(bytes.data(), n)).ok()) << n;
  }
  ModelRunnerOutput o = FullRunnerOutput();
  o.sampled_token_ids.pop_back();
  EXPECT_FALSE(DecodeRunnerOutput(EncodeRunnerOutput(o)).ok());
  EXPECT_FALSE(DecodeRunnerOutput(EncodeWorkerStep(WorkerStep{})).ok());
}

TEST(StepCodecTest, EmptyOutputRoundTrips) {
  const WorkerStep step;
  const std::vector<uint8_t> bytes = EncodeWorkerStep(step);
  auto decoded = DecodeWorkerStep(bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  ExpectSameStep(*decoded, step);
  EXPECT_TRUE(decoded->output.empty());
}

TEST(StepCodecTest, ShutdownRoundTrips) {
  WorkerStep step;
  step.shutdown = true;
  auto decoded = DecodeWorkerStep(EncodeWorkerStep(step));
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_TRUE(decoded->shutdown);
}

TEST(StepCodecTest, EncodingIsLittleEndianAfterMagicAndVersion) {
  WorkerStep step;
  step.output.step_id = 0x0102030405060708ull;
  const std::vector<uint8_t> bytes = EncodeWorkerStep(step);
  ASSERT_GE(bytes.size(), 17u);
  EXPECT_EQ(std::string(bytes.begin(), bytes.begin() + 4), "EMWS");
  EXPECT_EQ(bytes[4], 2);  // version 2
  EXPECT_EQ(bytes[8], 0);  // not shutting down
  const std::vector<uint8_t> step_id(bytes.begin() + 9, bytes.begin() + 17);
  EXPECT_EQ(step_id, (std::vector<uint8_t>{8, 7, 6, 5, 4, 3, 2, 1}));
}

TEST(StepCodecTest, EveryTruncationIsAnError) {
  const std::vector<uint8_t> bytes = EncodeWorkerStep(FullStep());
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto decoded = DecodeWorkerStep(std::span<const uint8_t>(bytes.data(), n));
    ASSERT_FALSE(decoded.ok()) << "prefix of " << n << " bytes decoded";
    EXPECT_EQ(decoded.status().code(), StatusCode::kInvalidArgument);
  }
}

TEST(StepCodecTest, TrailingBytesAreAnError) {
  std::vector<uint8_t> bytes = EncodeWorkerStep(FullStep());
  bytes.push_back(0);
  auto decoded = DecodeWorkerStep(bytes);
  ASSERT_FALSE(decoded.ok());
  EXPECT_NE(decoded.status().message().find("1 bytes after the end"), std::string::npos)
      << decoded.status().message();
}

TEST(StepCodecTest, WrongMagicVersionOrFlagIsAnError) {
  const std::vector<uint8_t> good = EncodeWorkerStep(WorkerStep{});
  std::vector<uint8_t> bytes = good;
  bytes[0] ^= 1;
  EXPECT_NE(DecodeWorkerStep(bytes).status().message().find("not a WorkerStep"), std::string::npos);
  bytes = good;
  bytes[4] = 3;
  EXPECT_NE(DecodeWorkerStep(bytes).status().message().find("version 3"), std::string::npos);
  bytes = good;
  bytes[8] = 2;  // shutdown is neither false nor true
  EXPECT_NE(DecodeWorkerStep(bytes).status().message().find("shutdown is 2, not a boolean"), std::string::npos);
}

TEST(StepCodecTest, HugeCountsFailWithoutAllocating) {
  std::vector<uint8_t> bytes = EncodeWorkerStep(WorkerStep{});
  // new_reqs' count follows magic, version, shutdown and step_id.
  std::memset(bytes.data() + 17, 0xff, 8);
  auto decoded = DecodeWorkerStep(bytes);
  ASSERT_FALSE(decoded.ok());
  EXPECT_NE(decoded.status().message().find("new_reqs claims 18446744073709551615 entries"), std::string::npos)
      << decoded.status().message();
}

TEST(StepCodecTest, ParallelListsMustAgree) {
  WorkerStep step = FullStep();
  step.output.num_scheduled_tokens.pop_back();
  EXPECT_NE(DecodeWorkerStep(EncodeWorkerStep(step)).status().message().find("3 scheduled requests but 2 token"),
            std::string::npos);
  step = FullStep();
  step.output.scheduled_spec_tokens.pop_back();
  EXPECT_FALSE(DecodeWorkerStep(EncodeWorkerStep(step)).ok());
  step = FullStep();
  step.output.num_tokens_to_propose.push_back(1);
  EXPECT_FALSE(DecodeWorkerStep(EncodeWorkerStep(step)).ok());
  step = FullStep();
  step.sampled_token_ids.pop_back();
  EXPECT_NE(DecodeWorkerStep(EncodeWorkerStep(step)).status().message().find("2 sampled requests but 1 token lists"),
            std::string::npos);
  // Empty speculation lists are allowed: no request speculates.
  step = FullStep();
  step.output.scheduled_spec_tokens.clear();
  step.output.num_tokens_to_propose.clear();
  EXPECT_TRUE(DecodeWorkerStep(EncodeWorkerStep(step)).ok());
}

// Every byte replaced by a few values: the decoder either refuses or returns a step that is
// exactly what the bytes say (it encodes back to them), and never reads out of bounds (the asan
// preset runs this).
TEST(StepCodecTest, CorruptedBytesNeverCrash) {
  const std::vector<uint8_t> good = EncodeWorkerStep(FullStep());
  int accepted = 0;
  for (size_t i = 0; i < good.size(); ++i) {
    for (uint8_t value : {uint8_t{0x00}, uint8_t{0x01}, uint8_t{0x7f}, uint8_t{0xff}}) {
      if (good[i] == value) continue;
      std::vector<uint8_t> bytes = good;
      bytes[i] = value;
      auto decoded = DecodeWorkerStep(bytes);
      if (!decoded.ok()) {
        EXPECT_EQ(decoded.status().code(), StatusCode::kInvalidArgument);
        continue;
      }
      ++accepted;
      ASSERT_EQ(EncodeWorkerStep(*decoded), bytes) << "byte " << i << " set to " << int{value};
    }
  }
  EXPECT_GT(accepted, 0);  // values (token ids, ids, floats) may be anything
}

}  // namespace
}  // namespace ember::parallel
