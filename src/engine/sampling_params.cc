// Range checks for SamplingParams. The ranges are the ones OpenAI documents for its fields and
// vLLM enforces for its extras; where neither gives an upper bound (temperature, n) ember picks
// one that no sensible request reaches, so that a typo cannot make a request enormous.
#include "engine/sampling_params.h"

#include <fmt/format.h>

#include <cmath>

#include "core/check.h"

namespace ember {
namespace {

// Written as !(lo <= x && x <= hi) so that NaN fails every check.
bool InClosed(double x, double lo, double hi) { return lo <= x && x <= hi; }

Status Bad(std::string_view field, std::string_view allowed, auto got) {
  return InvalidArgument(fmt::format("{} must be {} (got {})", field, allowed, got));
}

}  // namespace

Status SamplingParams::Validate(int64_t vocab_size) const {
  EMBER_CHECK(vocab_size > 0, "vocab_size {}", vocab_size);
  if (!InClosed(n, 1, kMaxN)) return Bad("n", fmt::format("in [1, {}]", kMaxN), n);
  if (!InClosed(temperature, 0.0, kMaxTemperature)) {
    return Bad("temperature", fmt::format("in [0, {}] (0 = greedy)", kMaxTemperature), temperature);
  }
  if (!(top_p > 0.0f && top_p <= 1.0f)) return Bad("top_p", "in (0, 1]", top_p);
  if (top_k < -1) return Bad("top_k", "-1 or 0 (off) or at least 1", top_k);
  if (!InClosed(min_p, 0.0, 1.0)) return Bad("min_p", "in [0, 1]", min_p);
  if (!InClosed(presence_penalty, -2.0, 2.0)) return Bad("presence_penalty", "in [-2, 2]", presence_penalty);
  if (!InClosed(frequency_penalty, -2.0, 2.0)) return Bad("frequency_penalty", "in [-2, 2]", frequency_penalty);
  if (!(repetition_penalty > 0.0f && std::isfinite(repetition_penalty))) {
    return Bad("repetition_penalty", "a finite number > 0 (1 = off)", repetition_penalty);
  }
  if (max_tokens < 1) return Bad("max_tokens", "at least 1", max_tokens);
  if (!InClosed(min_tokens, 0, max_tokens)) {
    return Bad("min_tokens", fmt::format("in [0, max_tokens = {}]", max_tokens), min_tokens);
  }
  for (int32_t id : stop_token_ids) {
    if (!InClosed(id, 0, vocab_size - 1)) {
      return Bad("stop_token_ids", fmt::format("token ids in [0, {}] (the model's vocabulary)", vocab_size - 1), id);
    }
  }
  if (stop.size() > static_cast<size_t>(kMaxStopStrings)) {
    return Bad("stop", fmt::format("at most {} strings", kMaxStopStrings), fmt::format("{} strings", stop.size()));
  }
  for (size_t i = 0; i < stop.size(); ++i) {
    if (stop[i].empty()) return Bad("stop", "non-empty strings", fmt::format("an empty string at index {}", i));
    if (stop[i].size() > static_cast<size_t>(kMaxStopStringBytes)) {
      return Bad("stop", fmt::format("strings of at most {} bytes", kMaxStopStringBytes),
                 fmt::format("{} bytes at index {}", stop[i].size(), i));
    }
  }
  if (logprobs.has_value() && !InClosed(*logprobs, 0, kMaxLogprobs)) {
    return Bad("logprobs", fmt::format("in [0, {}]", kMaxLogprobs), *logprobs);
  }
  if (prompt_logprobs.has_value() && !InClosed(*prompt_logprobs, 0, kMaxLogprobs)) {
    return Bad("prompt_logprobs", fmt::format("in [0, {}]", kMaxLogprobs), *prompt_logprobs);
  }
  return Status::Ok();
}

}  // namespace ember
