#include "runner/sampler/penalties.h"

#include <limits>

#include "core/check.h"

namespace ember {
namespace {

void CheckIds(std::span<const int32_t> ids, size_t vocab) {
  for (int32_t id : ids) {
    EMBER_CHECK(id >= 0 && static_cast<size_t>(id) < vocab, "token id {} outside the vocabulary of {}", id, vocab);
  }
}

}  // namespace

void ApplyRepetitionPenalty(float penalty, std::span<const int32_t> prompt_token_ids,
                            std::span<const int32_t> output_token_ids, std::span<float> logits,
                            std::vector<uint8_t>* seen) {
  EMBER_CHECK(seen->size() >= logits.size());
  CheckIds(prompt_token_ids, logits.size());
  CheckIds(output_token_ids, logits.size());
  uint8_t* mark = seen->data();
  auto penalise = [&](std::span<const int32_t> ids) {
    for (int32_t id : ids) {
      if (mark[id]) continue;
      mark[id] = 1;
      float& l = logits[static_cast<size_t>(id)];
      l = l > 0.0f ? l / penalty : l * penalty;
    }
  };
  penalise(prompt_token_ids);
  penalise(output_token_ids);
  for (int32_t id : prompt_token_ids) mark[id] = 0;
  for (int32_t id : output_token_ids) mark[id] = 0;
}

void ApplyPresenceFrequencyPenalties(float presence, float frequency, std::span<const int32_t> output_token_ids,
                                     std::span<float> logits, std::vector<int32_t>* counts) {
  EMBER_CHECK(counts->size() >= logits.size());
  CheckIds(output_token_ids, logits.size());
  int32_t* count = counts->data();
  for (int32_t id : output_token_ids) ++count[id];
  // The first occurrence of each id applies the whole penalty and zeroes the count, so repeated
  // ids are penalised once and the scratch is clean afterwards.
  for (int32_t id : output_token_ids) {
    if (count[id] == 0) continue;
    logits[static_cast<size_t>(id)] -= frequency * static_cast<float>(count[id]) + presence;
    count[id] = 0;
  }
}

void MaskTokens(std::span<const int32_t> token_ids, std::span<float> logits) {
  CheckIds(token_ids, logits.size());
  for (int32_t id : token_ids) logits[static_cast<size_t>(id)] = -std::numeric_limits<float>::infinity();
}

}  // namespace ember
