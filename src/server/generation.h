// The part of /v1/completions and /v1/chat/completions that is the same: submit one engine
// request per (prompt, choice), then hand out text deltas as the engine produces tokens, with
// stop strings applied and aborts on early exit. With n > 1 and prefix caching, the first choice
// of a prompt runs alone until its prompt is cached, then its siblings start from those blocks.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/protocol/api_error.h"
#include "server/serving_context.h"
#include "server/text_stream.h"

namespace ember::server {

struct ChoiceSpec {
  std::vector<int32_t> prompt_token_ids;
  SamplingParams sampling;  // n = 1
  int32_t priority = 0;
  uint64_t cache_salt_key = 0;
  int prompt_index = 0;     // which prompt of the call (completions accept several)
  KvTransferRequest kv_transfer;  // disaggregation (engine/kv_transfer_params.h)
  std::vector<MultiModalFeature> mm_features;  // the prompt's media (server/multimodal), in prompt order
};

struct ChoiceDelta {
  int choice = 0;
  TextDelta delta;
};

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;
};

class GenerationJob {
 public:
  // `slot` is the request's admission (server/admission.h), given back when the job ends.
  GenerationJob(ServingContext* context, std::vector<ChoiceSpec> choices, std::string request_id,
                Admission::Slot slot = {});
  ~GenerationJob();  // aborts whatever is still running (a client that went away)

  // Submits the choices (the first of each prompt now, its siblings after its prompt is cached).
  void Start();
  // The next delta if one is ready (never waits: SetWaker says when to ask again); nullopt when
  // none is, or when every choice finished.
  std::optional<ChoiceDelta> Next();
  bool done() const { return num_finished_ == choices_.size(); }
  void AbortAll();
  // `wake` runs (on the engine thread) whenever an event for this job arrives; empty clears it.
  void SetWaker(std::function<void()> wake) { stream_->SetListener(std::move(wake)); }
  const Usage& usage() const { return usage_; }
  // Disaggregation, a producer's answer: where the prompt's KV waits (the first choice's).
  const std::optional<RemoteKv>& kv_transfer_params() const { return kv_transfer_params_; }
  size_t num_choices() const { return choices_.size(); }

 private:
  struct Choice {
    ChoiceSpec spec;
    RequestIndex req = AsyncEngine::kNoRequest;
    std::unique_ptr<TextStream> text;
    bool submitted = false;
    bool finished = false;
  };
  void Submit(size_t choice);
  void SubmitDeferredSiblings(int prompt_index);

  ServingContext* context_;
  std::string request_id_;
  std::vector<Choice> choices_;
  std::shared_ptr<RequestStream> stream_;
  size_t num_finished_ = 0;
  Usage usage_;
  std::optional<RemoteKv> kv_transfer_params_;
  std::vector<bool> prompt_counted_;
  Admission::Slot slot_;  // held until the job ends
};

// The error a finished-with-error generation answers with: 503 when the engine itself failed
// (AsyncEngine::Fail, e.g. a tensor-parallel rank stopped answering), 400 for an error of the
// request (a token outside the vocabulary, ...).
ApiError GenerationError(const AsyncEngine& engine, const std::string& error);

}  // namespace ember::server
