// Test harness: an EngineCore over a FakeExecutor with small KV configurations, collecting every
// request's streamed tokens and its single final event.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine_core.h"
#include "fake_executor.h"
#include "kv/spec.h"

namespace ember::test {

// Two full-attention layers: one KV group.
inline kv::KvCacheConfig FullOnlyKv(int64_t block_size, int64_t num_blocks) {
  std::vector<kv::LayerKvSpec> layers(2, kv::LayerKvSpec{kv::AttentionKind::kFull, 0, 1, 8});
  auto config = kv::PlanKvGroups(layers, block_size, kv::KvDtype::kBF16);
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  config->num_blocks = num_blocks;
  return *config;
}

// Two sliding-window layers and one full layer (Muse Spark's pattern in miniature): three groups.
inline kv::KvCacheConfig HybridKv(int64_t block_size, int64_t num_blocks, int64_t window) {
  std::vector<kv::LayerKvSpec> layers = {{kv::AttentionKind::kSlidingWindow, window, 1, 8},
                                         {kv::AttentionKind::kSlidingWindow, window, 1, 8},
                                         {kv::AttentionKind::kFull, 0, 1, 8}};
  auto config = kv::PlanKvGroups(layers, block_size, kv::KvDtype::kBF16);
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  config->num_blocks = num_blocks;
  return *config;
}

inline std::vector<int32_t> Prompt(int64_t length, int32_t salt) {
  std::vector<int32_t> p;
  for (int64_t i = 0; i < length; ++i) p.push_back(static_cast<int32_t>(10 + (salt * 7919 + i * 31) % 30000));
  return p;
}

// A scheduler config for the fake model.
inline SchedulerConfig FakeModelConfig(int32_t max_num_seqs, int64_t max_num_batched_tokens, int64_t max_model_len) {
  SchedulerConfig c;
  c.vocab_size = kFakeVocabSize;
  c.max_num_seqs = max_num_seqs;
  c.max_num_batched_tokens = max_num_batched_tokens;
  c.max_model_len = max_model_len;
  return c;
}

// A scheduler config for the fake model with adaptive speculation of up to `k` draft tokens.
inline SchedulerConfig AdaptiveSpecConfig(int32_t max_num_seqs, int32_t k, StepCostModel cost,
                                          int64_t max_num_batched_tokens = 256, int64_t max_model_len = 2048) {
  SchedulerConfig c;
  c.vocab_size = kFakeVocabSize;
  c.max_num_seqs = max_num_seqs;
  c.max_num_batched_tokens = max_num_batched_tokens;
  c.max_model_len = max_model_len;
  c.num_speculative_tokens = k;
  c.adaptive_speculation = true;
  c.step_cost = std::move(cost);
  return c;
}

// Adds requests 0..num_requests-1 of `prompt_len` prompt tokens (Prompt(prompt_len, index)) that
// each generate exactly `max_tokens` tokens (EOS ignored).
inline void AddFixedLengthRequests(Scheduler& scheduler, int num_requests, int prompt_len, int max_tokens) {
  for (int r = 0; r < num_requests; ++r) {
    RequestInput input;
    input.external_id = "r" + std::to_string(r);
    input.prompt_token_ids = Prompt(prompt_len, r);
    input.sampling.max_tokens = max_tokens;
    input.sampling.ignore_eos = true;
    EXPECT_TRUE(scheduler.Add(static_cast<RequestIndex>(r), std::move(input)).ok());
  }
}

struct RequestResult {
  std::vector<int32_t> tokens;  // everything streamed, in order
  int num_final_events = 0;
  FinishReason reason = FinishReason::kNone;
  std::string error;
  RequestOutput final_event;
};

class EngineHarness {
 public:
  EngineHarness(SchedulerConfig sched, kv::KvCacheConfig kv, bool prefix_caching = true)
      : executor_(sched, static_cast<int>(kv.groups.size()), kv.block_size) {
    EngineCoreConfig config{sched, kv, kv::KvCacheManagerOptions{prefix_caching}};
    auto core = EngineCore::Create(config, &executor_);
    EXPECT_TRUE(core.ok()) << core.status().ToString();
    core_ = std::move(*core);
    executor_.Watch(&core_->scheduler(), &core_->kv_cache());
  }

  RequestIndex Add(std::vector<int32_t> prompt, int32_t max_tokens, int32_t priority = 0) {
    RequestInput input;
    input.external_id = "req-" + std::to_string(next_index_);
    input.prompt_token_ids = std::move(prompt);
    input.sampling.max_tokens = max_tokens;
    input.priority = priority;
    return Add(std::move(input));
  }
  RequestIndex Add(RequestInput input) {
    const RequestIndex index = next_index_++;
    const Status status = core_->AddRequest(index, std::move(input));
    EXPECT_TRUE(status.ok()) << status.ToString();
    results_[index];
    return index;
  }

  std::vector<RequestOutput> Step() {
    std::vector<RequestOutput> events = core_->Step();
    for (const RequestOutput& e : events) {
      RequestResult& r = results_[e.req];
      EXPECT_EQ(r.num_final_events, 0) << "request " << e.req << " got an event after its final one";
      r.tokens.insert(r.tokens.end(), e.new_token_ids.begin(), e.new_token_ids.end());
      if (e.finished) {
        ++r.num_final_events;
        r.reason = e.finish_reason;
        r.error = e.error;
        r.final_event = e;
        EXPECT_EQ(static_cast<int64_t>(r.tokens.size()), e.num_output_tokens);
      }
    }
    return events;
  }

  // Steps until nothing is left; returns the number of steps, failing the test past max_steps.
  int64_t RunToCompletion(int64_t max_steps) {
    int64_t steps = 0;
    while (core_->HasUnfinished()) {
      Step();
      if (++steps > max_steps) {
        ADD_FAILURE() << "not finished after " << max_steps << " steps";
        break;
      }
    }
    return steps;
  }

  // Every request finished exactly once, the pool is empty, the runner holds nothing.
  void ExpectAllReleased() {
    for (const auto& [index, r] : results_) EXPECT_EQ(r.num_final_events, 1) << "request " << index;
    EXPECT_FALSE(core_->HasUnfinished());
    EXPECT_EQ(core_->kv_cache().usage(), 0.0);
    EXPECT_EQ(core_->kv_cache().num_free_blocks(), core_->kv_cache().config().num_blocks - 1);
    const Status invariants = core_->kv_cache().CheckInvariants();
    EXPECT_TRUE(invariants.ok()) << invariants.ToString();
    EXPECT_EQ(executor_.num_runner_states(), 0u);
  }

  EngineCore& core() { return *core_; }
  FakeExecutor& executor() { return executor_; }
  RequestResult& result(RequestIndex index) { return results_[index]; }
  const std::map<RequestIndex, RequestResult>& results() const { return results_; }

 private:
  FakeExecutor executor_;
  std::unique_ptr<EngineCore> core_;
  std::map<RequestIndex, RequestResult> results_;
  RequestIndex next_index_ = 0;
};

}  // namespace ember::test
