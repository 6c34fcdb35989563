// Token budget, max_num_seqs, decode-first ordering and chunked prefill, with a pool large enough
// that nothing is preempted. The per-step contract invariants are checked by FakeExecutor.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "engine_harness.h"

namespace ember::test {
namespace {

TEST(SchedulerBatching, BudgetSeqLimitAndDecodeFirstEveryStep) {
  SchedulerConfig c;
  c.vocab_size = kFakeVocabSize;
  c.max_num_seqs = 3;
  c.max_num_batched_tokens = 20;
  c.max_model_len = 256;
  c.long_prefill_token_threshold = 8;
  EngineHarness h(c, FullOnlyKv(4, 512), /*prefix_caching=*/false);
  // Longest prompts first, so later arrivals decode while earlier ones are still in prefill.
  std::vector<RequestIndex> reqs;
  for (int i = 0; i < 8; ++i) reqs.push_back(h.Add(Prompt(73 - 9 * i, i), 6 + i));

  int64_t steps = 0, steps_mixing = 0;
  while (h.core().HasUnfinished() && steps++ < 500) {
    std::set<RequestIndex> decoding;  // running requests that need exactly one token
    for (RequestIndex r : reqs) {
      const Request* req = h.core().scheduler().Find(r);
      if (req && req->status() == RequestStatus::kRunning && req->num_tokens_to_compute() == 1) decoding.insert(r);
    }
    h.Step();
    const SchedulerOutput& out = h.executor().last_output();
    // Every decode is scheduled (the budget always covers max_num_seqs), ahead of all prefills.
    size_t num_decodes_seen = 0;
    for (size_t i = 0; i < out.scheduled_reqs.size(); ++i) {
      if (decoding.contains(out.scheduled_reqs[i])) {
        EXPECT_EQ(i, num_decodes_seen++) << "a prefill was batched before decode " << out.scheduled_reqs[i];
        EXPECT_EQ(out.num_scheduled_tokens[i], 1);
      }
    }
    EXPECT_EQ(num_decodes_seen, decoding.size()) << "a decode was skipped in step " << out.step_id;
    if (!decoding.empty() && out.scheduled_reqs.size() > decoding.size()) ++steps_mixing;
  }
  EXPECT_GT(steps_mixing, 0) << "the workload should mix decodes and prefills in one step";
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(h.result(reqs[i]).tokens, ExpectedOutput(Prompt(73 - 9 * i, i), 6 + i, 256));
    EXPECT_EQ(h.result(reqs[i]).reason, FinishReason::kLength);
  }
  h.ExpectAllReleased();
}

// A burst of prompts: a step shared by several requests holds at most shared_step_prefill_tokens
// prompt tokens, so the first prompts finish (and sample their first token) a chunk at a time
// rather than all at the end of one max_num_batched_tokens step; a request alone keeps the whole
// budget, and without chunked prefill the cap does not apply (a whole prompt could never fit).
TEST(SchedulerBatching, ASharedStepHoldsABoundedPrefill) {
  SchedulerConfig c;
  c.vocab_size = kFakeVocabSize;
  c.max_num_seqs = 16;
  c.max_num_batched_tokens = 512;
  c.max_model_len = 512;
  c.shared_step_prefill_tokens = 64;
  {
    EngineHarness h(c, FullOnlyKv(16, 512), /*prefix_caching=*/false);
    std::vector<RequestIndex> reqs;
    for (int i = 0; i < 8; ++i) reqs.push_back(h.Add(Prompt(32, i), 4));
    h.Step();
    const SchedulerOutput& first = h.executor().last_output();
    EXPECT_EQ(first.total_num_scheduled_tokens, 64);
    EXPECT_EQ(first.scheduled_reqs.size(), 2u);  // two whole prompts, the rest wait their turn
    while (h.core().HasUnfinished()) {
      h.Step();
      int64_t prefill = 0;
      const SchedulerOutput& out = h.executor().last_output();
      for (int32_t n : out.num_scheduled_tokens) prefill += n > 1 ? n : 0;
      EXPECT_LE(prefill, 64) << "step " << out.step_id;
    }
    for (int i = 0; i < 8; ++i) EXPECT_EQ(h.result(reqs[i]).tokens, ExpectedOutput(Prompt(32, i), 4, 512));
    h.ExpectAllReleased();
  }
  {
    EngineHarness h(c, FullOnlyKv(16, 512), /*prefix_caching=*/false);
    h.Add(Prompt(400, 1), 2);
    h.Step();
    EXPECT_EQ(h.executor().last_output().total_num_scheduled_tokens, 400) << "alone: the whole budget";
  }
  {
    c.enable_chunked_prefill = false;
    EngineHarness h(c, FullOnlyKv(16, 512), /*prefix_caching=*/false);
    h.Add(Prompt(300, 1), 2);
    h.Add(Prompt(100, 2), 2);
    h.Step();
    EXPECT_EQ(h.executor().last_output().total_num_scheduled_tokens, 400) << "whole prompts: no cap";
  }
}

// The prompt tokens each request got in the last step (0 when not scheduled).
int32_t ScheduledTokens(const SchedulerOutput& out, RequestIndex r) {
  for (size_t i = 0; i < out.scheduled_reqs.size(); ++i) {
    if (out.scheduled_reqs[i] == r) return out.num_scheduled_tokens[i];
  }
  return 0;
}

// A short prompt arriving while a long one is prefilled in shared steps goes first: long prompts
// take at most long_prefill_share of the step's prefill tokens while it waits, and a waiting long
// prompt held back by that share lets it pass. With the share at 1, arrival order decides.
TEST(SchedulerBatching, AShortPromptPassesLongPrefills) {
  SchedulerConfig c;
  c.vocab_size = kFakeVocabSize;
  c.max_num_seqs = 8;
  c.max_num_batched_tokens = 128;
  c.max_model_len = 1024;
  c.shared_step_prefill_tokens = 64;
  for (const double share : {0.5, 1.0}) {
    SCOPED_TRACE(share);
    c.long_prefill_share = share;
    EngineHarness h(c, FullOnlyKv(8, 1024), /*prefix_caching=*/false);
    const RequestIndex first_long = h.Add(Prompt(600, 1), 2);
    h.Step();
    EXPECT_EQ(ScheduledTokens(h.executor().last_output(), first_long), 128) << "alone: the whole budget";
    const RequestIndex second_long = h.Add(Prompt(300, 2), 2);
    const RequestIndex short_prompt = h.Add(Prompt(20, 3), 2);
    h.Step();
    const SchedulerOutput& out = h.executor().last_output();
    if (share < 1) {
      EXPECT_EQ(ScheduledTokens(out, first_long), 32) << "half of the 64 shared-step tokens";
      EXPECT_EQ(ScheduledTokens(out, second_long), 0) << "held back by the long share";
      EXPECT_EQ(ScheduledTokens(out, short_prompt), 20) << "passes the waiting long prompt";
    } else {
      EXPECT_EQ(ScheduledTokens(out, first_long), 64);
      EXPECT_EQ(ScheduledTokens(out, short_prompt), 0) << "behind both long prompts";
    }
    // No short prompt left to prefill: the long ones take the shared budget in arrival order again.
    while (share < 1 && h.core().scheduler().Find(short_prompt) != nullptr &&
           h.core().scheduler().Find(short_prompt)->num_tokens_to_compute() > 1) {
      h.Step();
    }
    if (share < 1) {
      h.Step();
      EXPECT_EQ(ScheduledTokens(h.executor().last_output(), first_long), 64);
    }
    while (h.core().HasUnfinished()) h.Step();
    EXPECT_EQ(h.result(first_long).tokens, ExpectedOutput(Prompt(600, 1), 2, 1024));
    EXPECT_EQ(h.result(second_long).tokens, ExpectedOutput(Prompt(300, 2), 2, 1024));
    EXPECT_EQ(h.result(short_prompt).tokens, ExpectedOutput(Prompt(20, 3), 2, 1024));
    h.ExpectAllReleased();
  }
}

TEST(SchedulerBatching, ChunkedPrefillSplitsLongPromptAndSeesEachPositionOnce) {
  SchedulerConfig c;
  c.vocab_size = kFakeVocabSize;
  c.max_num_seqs = 4;
  c.max_num_batched_tokens = 16;
  c.max_model_len = 512;
  EngineHarness h(c, FullOnlyKv(4, 256), /*prefix_caching=*/false);
  const RequestIndex r = h.Add(Prompt(100, 1), 5);
  std::vector<int32_t> chunks;
  while (h.core().HasUnfinished()) {
    h.Step();
    const SchedulerOutput& out = h.executor().last_output();
    if (!out.num_scheduled_tokens.empty()) chunks.push_back(out.num_scheduled_tokens[0]);
  }
  // 100 prompt tokens in chunks of 16 (the last one samples the first token), then 4 decodes.
  EXPECT_EQ(chunks, (std::vector<int32_t>{16, 16, 16, 16, 16, 16, 4, 1, 1, 1, 1}));
  std::vector<int64_t> expected(104);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(h.executor().positions(r), expected);
  EXPECT_EQ(h.result(r).tokens, ExpectedOutput(Prompt(100, 1), 5, 512));
  h.ExpectAllReleased();
}

TEST(SchedulerBatching, LongPrefillThresholdCapsOneRequestsChunk) {
  SchedulerConfig c;
  c.vocab_size = kFakeVocabSize;
  c.max_num_seqs = 4;
  c.max_num_batched_tokens = 64;
  c.max_model_len = 512;
  c.long_prefill_token_threshold = 24;
  EngineHarness h(c, FullOnlyKv(4, 256), false);
  const RequestIndex a = h.Add(Prompt(100, 1), 2);
  const RequestIndex b = h.Add(Prompt(30, 2), 2);
  h.Step();
  const SchedulerOutput& out = h.executor().last_output();
  EXPECT_EQ(out.scheduled_reqs, (std::vector<RequestIndex>{a, b}));
  EXPECT_EQ(out.num_scheduled_tokens, (std::vector<int32_t>{24, 24}));
  h.RunToCompletion(100);
  h.ExpectAllReleased();
}

TEST(SchedulerBatching, WithoutChunkedPrefillOnlyWholePrompts) {
  SchedulerConfig c;
  c.vocab_size = kFakeVocabSize;
  c.max_num_seqs = 4;
  c.max_num_batched_tokens = 64;
  c.max_model_len = 64;
  c.enable_chunked_prefill = false;
  EngineHarness h(c, FullOnlyKv(4, 256), false);
  const std::vector<int64_t> lengths = {40, 30, 20, 63};
  std::vector<RequestIndex> reqs;
  for (size_t i = 0; i < lengths.size(); ++i) reqs.push_back(h.Add(Prompt(lengths[i], i), 3));
  int64_t steps = 0;
  while (h.core().HasUnfinished() && steps++ < 100) {
    h.Step();
    const SchedulerOutput& out = h.executor().last_output();
    for (const NewRequestData& n : out.new_reqs) {
      auto it = std::find(out.scheduled_reqs.begin(), out.scheduled_reqs.end(), n.req);
      const int64_t scheduled = out.num_scheduled_tokens[it - out.scheduled_reqs.begin()];
      EXPECT_EQ(scheduled, static_cast<int64_t>(n.prompt_token_ids.size())) << "prompt split without chunking";
    }
    for (int32_t n : out.num_scheduled_tokens) EXPECT_TRUE(n == 1 || n >= 20);
  }
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(h.result(reqs[i]).tokens, ExpectedOutput(Prompt(lengths[i], i), 3, 64));
  }
  h.ExpectAllReleased();
}

TEST(SchedulerBatching, EosAndStopTokensEndRequestsAndFreeTheirSlots) {
  SchedulerConfig c;
  c.vocab_size = kFakeVocabSize;
  c.max_num_seqs = 2;
  c.max_num_batched_tokens = 32;
  c.max_model_len = 128;
  EngineHarness h(c, FullOnlyKv(4, 64), false);
  constexpr int32_t kEos = 3;
  // The model emits EOS at position 12 and token 77 at position 14 for every prompt.
  h.executor().set_token_fn([](std::span<const int32_t> prompt, int64_t pos) {
    return pos == 12 ? kEos : pos == 14 ? 77 : FakeToken(prompt, pos);
  });
  auto make = [&](int32_t salt, bool ignore_eos, std::vector<int32_t> stop_ids, int32_t min_tokens) {
    RequestInput in;
    in.prompt_token_ids = Prompt(10, salt);
    in.sampling.max_tokens = 20;
    in.sampling.ignore_eos = ignore_eos;
    in.sampling.stop_token_ids = std::move(stop_ids);
    in.sampling.min_tokens = min_tokens;
    in.eos_token_id = kEos;
    return h.Add(std::move(in));
  };
  const RequestIndex eos = make(1, false, {}, 0);
  const RequestIndex ignoring = make(2, true, {77}, 0);
  const RequestIndex min_tokens = make(3, false, {}, 4);
  h.RunToCompletion(200);
  EXPECT_EQ(h.result(eos).reason, FinishReason::kStop);
  EXPECT_EQ(h.result(eos).final_event.stop_token, kEos);
  EXPECT_EQ(h.result(eos).tokens.size(), 3u);  // positions 10, 11, 12 (EOS included)
  EXPECT_EQ(h.result(ignoring).reason, FinishReason::kStop);
  EXPECT_EQ(h.result(ignoring).final_event.stop_token, 77);
  EXPECT_EQ(h.result(ignoring).tokens.size(), 5u);
  EXPECT_EQ(h.result(min_tokens).reason, FinishReason::kLength);  // EOS came as token 3 < min_tokens
  EXPECT_EQ(h.result(min_tokens).tokens.size(), 20u);
  h.ExpectAllReleased();
}

}  // namespace
}  // namespace ember::test
