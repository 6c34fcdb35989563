// Logit penalties and masks, applied in place to one row of logits before temperature.
// Each function touches only the entries of the token ids it is given, so its cost is the length
// of the token lists, not the vocabulary.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace ember {

// HF/vLLM repetition penalty: every distinct token id in prompt or output is penalised once,
// positive logits divided by `penalty`, negative ones multiplied. `seen` is scratch of at least
// vocabulary size, all zero on entry and on return.
void ApplyRepetitionPenalty(float penalty, std::span<const int32_t> prompt_token_ids,
                            std::span<const int32_t> output_token_ids, std::span<float> logits,
                            std::vector<uint8_t>* seen);

// OpenAI presence/frequency penalties over the output tokens only:
// logit[t] -= frequency * count(t) + presence * (count(t) > 0). `counts` is scratch of at least
// vocabulary size, all zero on entry and on return.
void ApplyPresenceFrequencyPenalties(float presence, float frequency, std::span<const int32_t> output_token_ids,
                                     std::span<float> logits, std::vector<int32_t>* counts);

// Sets the listed token ids to -inf (min_tokens: EOS and stop tokens cannot be sampled yet).
void MaskTokens(std::span<const int32_t> token_ids, std::span<float> logits);

}  // namespace ember
