// A deterministic stand-in for the model runner: it keeps the runner's request states from the
// SchedulerOutput diffs (runner/request_state.h, the real contract), records every position it
// "computes", and samples token = f(prompt, position) once a request's tokens are all computed.
// Because f ignores the batch, a request gets the same tokens whatever else runs or however often
// it is preempted. Each step it also checks the scheduler's invariants (reference/codebases.md §9.1).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <vector>

#include "engine/executor.h"
#include "engine/scheduler.h"
#include "kv/kv_cache_manager.h"
#include "runner/request_state.h"

namespace ember::test {

// FNV-1a over the prompt, mixed with the position: a token id in [100, 5100).
inline int32_t FakeToken(std::span<const int32_t> prompt, int64_t position) {
  uint64_t h = 1469598103934665603ull;
  for (int32_t t : prompt) h = (h ^ static_cast<uint32_t>(t)) * 1099511628211ull;
  h = (h ^ static_cast<uint64_t>(position)) * 1099511628211ull;
  h ^= h >> 29;
  return 100 + static_cast<int32_t>(h % 5000);
}

// The output a request gets when nothing stops it early: max_tokens tokens, capped by max_model_len.
inline std::vector<int32_t> ExpectedOutput(std::span<const int32_t> prompt, int64_t max_tokens, int64_t max_model_len) {
  std::vector<int32_t> out;
  const int64_t p = static_cast<int64_t>(prompt.size());
  for (int64_t pos = p; pos < p + max_tokens && pos < max_model_len; ++pos) out.push_back(FakeToken(prompt, pos));
  return out;
}

// SchedulerConfig::vocab_size for the fake model: above every prompt id the tests use (Prompt()
// and the random test stay below 30010) and every FakeToken.
inline constexpr int64_t kFakeVocabSize = 32000;

class FakeExecutor : public Executor {
 public:
  using TokenFn = std::function<int32_t(std::span<const int32_t> prompt, int64_t position)>;

  FakeExecutor(const SchedulerConfig& config, int num_kv_groups, int64_t block_size)
      : config_(config), states_(num_kv_groups), block_size_(block_size) {}

  // Lets the invariant checks see the scheduler's side; both outlive this executor's use.
  void Watch(const Scheduler* scheduler, const kv::KvCacheManager* kv) {
    scheduler_ = scheduler;
    kv_ = kv;
  }
  void set_token_fn(TokenFn fn) { token_fn_ = std::move(fn); }
  // Speculative decoding: when set, a request asked for a draft gets the true next tokens, except
  // that a position where `wrong(prompt, position)` holds gets a wrong token (and so does every
  // position after it, so drafts go wrong mid-way like real ones).
  using WrongFn = std::function<bool(std::span<const int32_t> prompt, int64_t position)>;
  void set_draft_errors(WrongFn wrong) { wrong_ = std::move(wrong); }
  // When set too, each draft token comes with `confidence(position)` (a block drafter's
  // per-token confidence head, Draft::confidences).
  using ConfidenceFn = std::function<float(int64_t position)>;
  void set_draft_confidences(ConfidenceFn confidence) { confidence_ = std::move(confidence); }
  int64_t num_drafted() const { return num_drafted_; }

  ModelRunnerOutput Execute(const SchedulerOutput& out) override {
    CheckInvariants(out);
    last_output_ = out;
    const Status applied = states_.Apply(out);
    EXPECT_TRUE(applied.ok()) << applied.ToString();
    ModelRunnerOutput result;
    result.step_id = out.step_id;
    ++num_steps_;
    for (size_t i = 0; i < out.scheduled_reqs.size(); ++i) {
      RunnerRequest* r = states_.Find(out.scheduled_reqs[i]);
      if (r == nullptr) continue;  // Apply already reported it
      CheckBlocksMatchScheduler(*r);
      static const std::vector<int32_t> kNone;
      const std::vector<int32_t>& draft = out.scheduled_spec_tokens.empty() ? kNone : out.scheduled_spec_tokens[i];
      for (int32_t k = 0; k < out.num_scheduled_tokens[i]; ++k) positions_[r->req].push_back(r->num_computed_tokens + k);
      total_tokens_ += out.num_scheduled_tokens[i];
      r->num_computed_tokens += out.num_scheduled_tokens[i];
      EXPECT_LE(r->num_computed_tokens, r->num_tokens() + static_cast<int64_t>(draft.size()));
      result.reqs.push_back(r->req);
      std::vector<int32_t> sampled;
      if (r->num_computed_tokens == r->num_tokens() + static_cast<int64_t>(draft.size())) {
        // Verification: keep the drafts the "target" agrees with, then its own token.
        size_t accepted = 0;
        while (accepted < draft.size() && draft[accepted] == token_fn_(r->prompt_token_ids(), r->num_tokens() + accepted)) {
          ++accepted;
        }
        for (size_t j = 0; j <= accepted; ++j) sampled.push_back(token_fn_(r->prompt_token_ids(), r->num_tokens() + j));
        r->tokens.insert(r->tokens.end(), sampled.begin(), sampled.end());  // the runner keeps its own copy
      }
      result.sampled_token_ids.push_back(sampled);
      if (wrong_ && !out.num_tokens_to_propose.empty() && out.num_tokens_to_propose[i] > 0 && !sampled.empty()) {
        result.draft_token_ids.resize(out.scheduled_reqs.size());
        std::vector<int32_t>& d = result.draft_token_ids[result.reqs.size() - 1];
        bool gone_wrong = false;
        for (int32_t j = 0; j < out.num_tokens_to_propose[i]; ++j) {
          const int64_t pos = r->num_tokens() + j;
          gone_wrong = gone_wrong || wrong_(r->prompt_token_ids(), pos);
          d.push_back(gone_wrong ? 7 : token_fn_(r->prompt_token_ids(), pos));
        }
        if (confidence_) {
          result.draft_confidences.resize(out.scheduled_reqs.size());
          std::vector<float>& c = result.draft_confidences[result.reqs.size() - 1];
          for (int32_t j = 0; j < out.num_tokens_to_propose[i]; ++j) c.push_back(confidence_(r->num_tokens() + j));
        }
        num_drafted_ += static_cast<int64_t>(d.size());
      }
    }
    return result;
  }

  // Disaggregation: layouts without memory behind them (the fake has no KV store); what the
  // engine core hands a connector.
  Expected<KvExportSpans> ExportKvSpans(std::span<const std::vector<int32_t>> block_tables,
                                        int64_t num_tokens) const override {
    KvExportSpans spans;
    spans.layout.num_tokens = num_tokens;
    spans.layout.block_size = block_size_;
    spans.layout.groups.resize(block_tables.size());
    return spans;
  }
  Expected<KvImportSpans> ImportKvSpans(std::span<const std::vector<int32_t>> block_tables, int64_t num_tokens,
                                        int64_t first_token) override {
    KvImportSpans spans;
    spans.layout.num_tokens = num_tokens;
    spans.layout.block_size = block_size_;
    spans.layout.groups.resize(block_tables.size());
    (void)first_token;
    return spans;
  }

  // Every position computed for a request, in order, across preemptions.
  const std::vector<int64_t>& positions(RequestIndex req) { return positions_[req]; }
  int64_t total_tokens() const { return total_tokens_; }
  const SchedulerOutput& last_output() const { return last_output_; }
  int64_t num_steps() const { return num_steps_; }
  size_t num_runner_states() const { return states_.size(); }

 private:
  void CheckInvariants(const SchedulerOutput& out) {
    ASSERT_EQ(out.scheduled_reqs.size(), out.num_scheduled_tokens.size());
    int64_t sum = 0;
    for (int32_t n : out.num_scheduled_tokens) {
      EXPECT_GT(n, 0);
      sum += n;
    }
    EXPECT_EQ(sum, out.total_num_scheduled_tokens);
    EXPECT_LE(sum, config_.max_num_batched_tokens);
    EXPECT_LE(static_cast<int64_t>(out.scheduled_reqs.size()), config_.max_num_seqs);
    EXPECT_EQ(out.new_reqs.size() + out.cached_reqs.size(), out.scheduled_reqs.size());
    std::map<RequestIndex, int64_t> start;  // num_computed_tokens before this step
    for (const NewRequestData& n : out.new_reqs) {
      EXPECT_TRUE(start.emplace(n.req, n.num_computed_tokens).second) << "request twice in one step";
      // A prefix hit is block aligned; a consumer's pulled prompt KV ends where the producer's did.
      const Request* pulled = scheduler_ != nullptr ? scheduler_->Find(n.req) : nullptr;
      if (pulled == nullptr || !pulled->kv_transfer().remote_prefill) {
        EXPECT_EQ(n.num_computed_tokens % block_size_, 0) << "a prefix hit is block aligned";
      }
    }
    for (const CachedRequestData& c : out.cached_reqs) {
      EXPECT_TRUE(start.emplace(c.req, c.num_computed_tokens).second) << "request twice in one step";
    }
    if (scheduler_ == nullptr) return;
    EXPECT_LE(scheduler_->Stats().num_running, config_.max_num_seqs);
    for (size_t i = 0; i < out.scheduled_reqs.size(); ++i) {
      const RequestIndex idx = out.scheduled_reqs[i];
      const Request* req = scheduler_->Find(idx);
      ASSERT_NE(req, nullptr) << "scheduled request " << idx << " unknown to the scheduler";
      ASSERT_TRUE(start.contains(idx));
      const int64_t end = start[idx] + out.num_scheduled_tokens[i];
      EXPECT_EQ(req->num_computed_tokens(), end);
      EXPECT_LE(end, req->num_tokens() + req->num_spec_tokens());
      if (!out.scheduled_spec_tokens.empty()) {
        EXPECT_EQ(static_cast<int32_t>(out.scheduled_spec_tokens[i].size()), req->num_spec_tokens());
        if (req->num_spec_tokens() > 0) {
          EXPECT_EQ(end, req->num_tokens() + req->num_spec_tokens()) << "a draft is verified in full";
        }
      }
      for (const auto& group : kv_->Blocks(idx).per_group) {
        EXPECT_GE(static_cast<int64_t>(group.size()) * block_size_, end) << "blocks do not cover the step";
      }
    }
  }

  // The runner's block lists (after the diff) are the scheduler's, except where a sliding-window
  // group released a block (null there; the runner may keep the old id, never read).
  void CheckBlocksMatchScheduler(const RunnerRequest& r) const {
    if (kv_ == nullptr) return;
    const kv::KvBlocks& held = kv_->Blocks(r.req);
    ASSERT_EQ(held.per_group.size(), r.block_ids.size());
    for (size_t g = 0; g < r.block_ids.size(); ++g) {
      ASSERT_EQ(held.per_group[g].size(), r.block_ids[g].size()) << "request " << r.req << " group " << g;
      for (size_t j = 0; j < r.block_ids[g].size(); ++j) {
        if (held.per_group[g][j] != kv::kNullBlock) {
          EXPECT_EQ(held.per_group[g][j], r.block_ids[g][j]);
        }
      }
    }
  }

  SchedulerConfig config_;
  RequestStates states_;
  int64_t block_size_;
  const Scheduler* scheduler_ = nullptr;
  const kv::KvCacheManager* kv_ = nullptr;
  TokenFn token_fn_ = FakeToken;
  std::map<RequestIndex, std::vector<int64_t>> positions_;
  SchedulerOutput last_output_;
  int64_t total_tokens_ = 0;
  int64_t num_steps_ = 0;
  WrongFn wrong_;
  ConfidenceFn confidence_;
  int64_t num_drafted_ = 0;
};

}  // namespace ember::test
