// How one request samples and when it stops: OpenAI's fields plus vLLM's extras. A plain value
// type; Validate() is called at admission and its message goes back to the client verbatim.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/token_constraint.h"

namespace ember {

struct SamplingParams {
  // Limits Validate() enforces beyond OpenAI's documented ranges (see sampling_params.cc).
  static constexpr int32_t kMaxN = 128;
  static constexpr float kMaxTemperature = 100.0f;
  static constexpr int32_t kMaxLogprobs = 20;  // vLLM's default max_logprobs
  static constexpr int32_t kMaxStopStrings = 64;
  static constexpr int32_t kMaxStopStringBytes = 1024;
  // Temperatures below this are greedy, as in vLLM: 1 / T would overflow the float range.
  static constexpr float kGreedyTemperature = 1e-5f;

  int32_t n = 1;                    // completions per prompt; they share the prompt's KV blocks
  float temperature = 1.0f;         // 0 (below kGreedyTemperature) = greedy
  float top_p = 1.0f;               // (0, 1]
  int32_t top_k = 0;                // 0 or -1 = off
  float min_p = 0.0f;               // [0, 1]
  float presence_penalty = 0.0f;    // [-2, 2], OpenAI semantics
  float frequency_penalty = 0.0f;   // [-2, 2]
  float repetition_penalty = 1.0f;  // > 0, vLLM/HF semantics (prompt and output tokens)
  std::optional<uint64_t> seed;     // same seed => same tokens, whatever else is in the batch
  int32_t max_tokens = 16;          // generated tokens at most (the server fills the default)
  int32_t min_tokens = 0;           // EOS and stop tokens are masked until this many
  bool ignore_eos = false;
  std::vector<int32_t> stop_token_ids;
  std::vector<std::string> stop;    // stop strings, matched on the detokenized output
  bool include_stop_str_in_output = false;
  std::optional<int32_t> logprobs;  // top-k logprobs per generated token (0 = only the chosen one)
  // vLLM's prompt_logprobs: for every prompt token but the first, its logprob given the tokens
  // before it, plus the top-k at that position (0 = only the prompt token). Such a request
  // skips the prefix cache, since cached positions are never computed.
  std::optional<int32_t> prompt_logprobs;
  // Structured output (response_format, structured_outputs, a forced tool call): the tokens the
  // grammar allows, masked before sampling and before logprobs; null = unconstrained. Compiled
  // once per schema and shared by every request that uses it. Constrained requests never
  // speculate (runner/README.md).
  std::shared_ptr<const TokenConstraint> constraint;

  // Checks ranges and combinations against the model's vocabulary size; the message names the field.
  Status Validate(int64_t vocab_size) const;
  bool greedy() const { return temperature < kGreedyTemperature; }
};

}  // namespace ember
