// DSparkProposer: vLLM's `dspark` speculative method on ember's Proposer seam.
//
// Each step the runner hands it the target's hidden states at the drafter's tap layers for every
// position it verified (ObserveTargetHiddenStates); the proposer projects them into the request's
// context K/V at once (DSparkDrafter::AppendContext) and keeps nothing else of them. Propose then
// drafts one block per request whose context reaches its anchor (the token just sampled): one
// backbone forward for the whole batch, then the Markov stage left to right per request.
//
// Drafts are the argmax unless draft_sample_method is "probabilistic" and the request samples
// (temperature T > 0): then each token is drawn from softmax(l_k / T) on the drafter's own seeded
// stream (markov_head.h), the next Markov step conditions on the drawn token, and the
// distributions go to the runner, which verifies with min(1, p/q) (vLLM's rule; runner/sampler/
// verify.h). A one-hot argmax draft is lossless too, but a sampling target rejects it more often.
//
// Confidences are the per-position c_k (prefix survival is their product), for the scheduler's
// verification length. With confidence_threshold > 0 a draft also ends before its first position
// with c_k below it (llama.cpp's --spec-draft-conf-min, DeepSpec's static threshold).
//
// Rollback needs no bookkeeping: the runner reports only verified positions, in order, so the
// context never holds a rejected draft. A report that starts before the context's end (a request
// recomputed from there) cuts the context back to it. One that starts after it (a prompt prefix
// the target took from its prefix cache) restores the context before it from the drafter's own
// prefix cache (context_cache.h: blocks keyed by the target's block hashes, stored as requests
// project them). Lacking a block, the context restarts after the gap and the request drafts from
// what it holds (DSparkContext::CanDraftAt): a windowed drafter, once the gap leaves its window,
// as if nothing was missing; one with full-attention layers without the missing positions (on the
// chat prompts of bench/datasets/dspark_chat.jsonl, without their ~30-token system prompt, 2.35
// tokens per step instead of 2.43 at 1 request, 7 drafts verified).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/status.h"
#include "spec/dspark/context_cache.h"
#include "spec/dspark/drafter.h"
#include "spec/dspark/markov_head.h"
#include "spec/proposer.h"

namespace ember::spec::dspark {

struct DSparkProposerOptions {
  // Tokens drafted per request per call, at most the drafter's block_size (ProposalInput::max_tokens
  // caps it further).
  int32_t num_speculative_tokens = 7;
  // Blocks per drafter forward; more requests are drafted in several forwards.
  int64_t max_num_seqs = 16;
  // Context positions projected per AppendContext (a longer prefill report is split; the result
  // is the same, the projection being row-independent): sizes the workspace and the feature
  // buffer (rows x taps x hidden floats), with max_num_seqs.
  int64_t max_context_rows = 512;
  // 0: off. Otherwise a draft ends before the first position whose confidence is below it.
  float confidence_threshold = 0.0f;
  // draft_sample_method "probabilistic": a request with temperature T > 0 gets tokens drawn from
  // softmax(l_k / T) and those distributions (verified with min(1, p/q)); greedy ones the argmax.
  bool sample_drafts = false;
  // The drafter's prefix cache (context_cache.h), on when the target caches prefixes: its block
  // size is the target's KV block size, and it holds as many positions as the target's KV cache
  // (0: off).
  // The draft vocabulary (DSparkConfig::draft_vocab): -1 DefaultDraftVocabSize, 0 none (the full
  // vocabulary), N its first N ids.
  int32_t draft_vocab_size = -1;
  // Quantize the drafter's own matmuls to Q8_0 at load (DSparkDrafter::QuantizeLinearsQ8_0).
  bool quantize_q8_0 = false;
  int64_t context_cache_block_size = 16;
  int64_t context_cache_positions = 0;
};

// The target's final norm over rows of its residual stream (CausalLM::ApplyFinalNorm): a tap at
// the target's last layer is transformers' normed last hidden state (checkpoint_layout.md "Taps").
using TargetFinalNorm = std::function<Status(const float* x, int64_t rows, float* out)>;

class DSparkProposer final : public Proposer {
 public:
  // `final_norm` is needed only when a tap is the target's last layer.
  static Expected<std::unique_ptr<DSparkProposer>> Create(std::unique_ptr<DSparkDrafter> drafter,
                                                          const DSparkTargetInfo& target, TargetFinalNorm final_norm,
                                                          const DSparkProposerOptions& options);

  std::string_view name() const override { return "dspark"; }
  // The confidence head is trained for prefix survival (and temperature-scaled when the drafter
  // ships calibration.json), so the scheduler plans verification from it (Algorithm 1).
  bool confidences_calibrated() const override { return drafter_->config().enable_confidence_head; }
  std::span<const int32_t> TargetHiddenStateLayers() const override { return drafter_->config().target_layer_ids; }
  // Keeps the request's tap rows; they are projected into its context lazily (see kWaitingRowsPerSeq).
  void ObserveTargetHiddenStates(RequestId req, const TargetHiddenStates& states) override;
  void FinishObservations() override;

  // The context is kept current lazily: a request's reported rows wait, unprojected, until it
  // drafts (Propose projects the waiting rows of every request it drafts for, in one batch).
  // Projecting is the drafter's upkeep, ~2.1M multiply-adds a row for SmolLM2's drafter, ~1.5% of
  // its target; where the plans verify nothing (a 16-request server) it was most of the time the
  // engine spent on a drafter that did not draft (bench/results/dspark_s36). So nothing is
  // projected for a request that does not draft, prompt rows included, except where the rows
  // waiting in all reach max_waiting_rows() (kWaitingRowsPerSeq a sequence, shared: one request
  // may hold more while others hold less), which bounds their memory (feature_width floats a row:
  // 11.5 KB for SmolLM2's drafter, 2.9 MB a sequence, 47 MB at 16); then the requests with the
  // most rows waiting are projected first (with a bound per request, every request that reached
  // 256 tokens was projected whole, drafting or not). The prefix cache gets a request's blocks as
  // they are projected; a request that finishes with more than kRecentRows waiting (it was not
  // drafting: speculation was off at that load) drops them instead, so a later request that the
  // target serves that prefix from its own cache drafts after a gap (see RestoreFromCache).
  static constexpr int64_t kWaitingRowsPerSeq = 256;
  int64_t max_waiting_rows() const { return options_.max_num_seqs * kWaitingRowsPerSeq; }
  // Rows reported and not projected yet, over all requests.
  int64_t num_waiting_rows() const { return waiting_rows_; }
  static constexpr int64_t kRecentRows = 32;
  void Propose(std::span<const ProposalInput> inputs, std::span<Draft> drafts) override;
  // The part of the last Propose call's projection that was rows of earlier steps (a request that
  // did not draft in them) or prompt rows: all but the last step's report of each request, up to
  // the num_speculative_tokens + 1 rows a drafting step reports. The projection's time is shared
  // out by rows. Adaptive speculation prices drafting without it: a probe after 16-256 steps
  // without drafting projects them all (4.5-5 ms beside a training run on a Zen 5, where a steady
  // drafting step took ~1 ms), and charged to every step that price kept the plans from
  // verifying, so the probes grew rarer and the rows waiting more (bench/results/dspark_s34).
  double last_catch_up_seconds() const override { return catch_up_seconds_; }
  void OnReleased(RequestId req, std::span<const int32_t> tokens, int64_t num_prompt_tokens, bool completed) override;

  const DSparkDrafter& drafter() const { return *drafter_; }
  int64_t num_tracked_requests() const { return static_cast<int64_t>(requests_.size()); }
  // Rows of `req` reported and not projected yet (0 for an unknown request).
  int64_t num_waiting_rows(RequestId req) const {
    auto it = requests_.find(req);
    return it == requests_.end() ? 0 : it->second.pending_rows;
  }
  // The request's context store (after projecting what was reported), or nullptr.
  const DSparkContext* context(RequestId req);
  // The drafter's prefix cache, or nullptr when off.
  const DSparkContextCache* context_cache() const { return cache_.get(); }

 private:
  DSparkProposer(std::unique_ptr<DSparkDrafter> drafter, const DSparkTargetInfo& target, TargetFinalNorm final_norm,
                 const DSparkProposerOptions& options);
  void ProposeBatch(std::span<const ProposalInput> inputs, std::span<Draft> drafts);

  std::unique_ptr<DSparkDrafter> drafter_;
  DSparkTargetInfo target_;
  TargetFinalNorm final_norm_;
  DSparkProposerOptions options_;
  MarkovStage markov_;
  struct RequestState {
    explicit RequestState(DSparkContext c) : context(std::move(c)) {}
    DSparkContext context;
    std::vector<kv::BlockHash> hashes;  // the target's block hashes of the tokens seen so far
    int64_t next_block_to_store = 0;
    // Reported rows not projected yet ([pending_rows, feature_width]), positions context.end() ..
    std::vector<float> pending;
    int64_t pending_rows = 0;
    int64_t last_report_rows = 0;  // of them, the rows of the last report (the step just run)
    int64_t next_position() const { return context.end() + pending_rows; }
  };
  // Projects the waiting rows of `states` into their contexts, as one batch.
  void Project(std::span<RequestState* const> states);
  void ProjectOne(RequestState& state) {
    RequestState* one[] = {&state};
    Project(one);
  }
  void RestoreFromCache(RequestState& state, const TargetHiddenStates& states);
  // A new request's state, with a waiting-rows buffer a finished request left (spare_pending_).
  RequestState NewRequestState();

  std::unordered_map<RequestId, RequestState> requests_;
  std::unique_ptr<DSparkContextCache> cache_;  // null when off
  // Scratch reused across calls.
  std::vector<float> features_;    // Project's batch [rows, feature_width]
  std::vector<int64_t> positions_;  // its rows' sequence positions
  std::vector<float> k_, v_;        // projected rows [num_layers, rows, kv_width]
  std::vector<RequestState*> to_project_;  // the requests a Project call covers
  int64_t waiting_rows_ = 0;  // num_waiting_rows
  // Waiting-rows buffers of finished requests, kept for new ones: a buffer grows to megabytes
  // (kWaitingRowsPerSeq rows), and one allocated afresh for every request faults in new pages as
  // it fills. A warm 16-request SmolLM2 server that never drafted took 2,653 page faults per 64
  // prompts without this, 196-551 with it (a plain server 75; bench/results/dspark_s36). At most
  // max_num_seqs are kept, none larger than kWaitingRowsPerSeq rows' worth.
  std::vector<std::vector<float>> spare_pending_;
  double catch_up_seconds_ = 0.0;          // last_catch_up_seconds
  std::vector<DSparkDrafter::Block> blocks_;
  std::vector<size_t> block_input_;  // the input each block answers
  std::vector<MarkovBlock> markov_blocks_;
  std::vector<BlockDraft> block_drafts_;  // one per block of the last drafting call
  bool noted_prefix_gap_ = false;
};

}  // namespace ember::spec::dspark
