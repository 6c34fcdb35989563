#include "runner/sampler/sampler.h"

#include <utility>

#include "core/check.h"
#include "runner/sampler/fast_exp.h"
#include "runner/sampler/logprobs.h"
#include "runner/sampler/penalties.h"
#include "core/counter_random.h"
#include "runner/sampler/top_k_top_p.h"
#include "runner/sampler/verify.h"

namespace ember {
namespace {

// Per-thread buffers sized to the vocabulary, reused across rows and steps so that a row costs
// no allocation. The penalty scratch is all zero between uses.
struct RowScratch {
  std::vector<uint8_t> seen;
  std::vector<int32_t> counts;
  std::vector<float> raw_logits;
  std::vector<int32_t> masked;
  FilterScratch filter;
  FilteredDistribution dist;
  std::vector<double> residual;
};

RowScratch& ThreadScratch(int64_t vocab) {
  thread_local RowScratch scratch;
  if (static_cast<int64_t>(scratch.seen.size()) < vocab) {
    scratch.seen.assign(static_cast<size_t>(vocab), 0);
    scratch.counts.assign(static_cast<size_t>(vocab), 0);
  }
  return scratch;
}

}  // namespace

int32_t ArgMax(std::span<const float> values) {
  // The maximum with independent running maxima first, then its first position: two cheap passes
  // beat one with a loop-carried dependency on the best index.
  const float max_value = MaxValue(values);
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] == max_value) return static_cast<int32_t>(i);
  }
  return 0;  // every value -inf or NaN
}

Sampler::Sampler(int64_t vocab_size, std::vector<int32_t> eos_token_ids)
    : vocab_size_(vocab_size), eos_token_ids_(std::move(eos_token_ids)) {
  EMBER_CHECK(vocab_size_ > 0);
  for (int32_t id : eos_token_ids_) EMBER_CHECK(id >= 0 && id < vocab_size_, "EOS id {} outside the vocabulary", id);
}

std::vector<SampledToken> Sampler::Sample(std::span<float> logits, std::span<const SamplerRow> rows,
                                          ThreadPool* pool) const {
  EMBER_CHECK(static_cast<int64_t>(logits.size()) == static_cast<int64_t>(rows.size()) * vocab_size_,
              "{} logits for {} rows of {}", logits.size(), rows.size(), vocab_size_);
  std::vector<SampledToken> out(rows.size());
  auto run = [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      out[static_cast<size_t>(r)] =
          SampleRow(logits.subspan(static_cast<size_t>(r * vocab_size_), static_cast<size_t>(vocab_size_)),
                    rows[static_cast<size_t>(r)]);
    }
  };
  if (pool != nullptr && rows.size() > 1) {
    pool->ParallelFor(static_cast<int64_t>(rows.size()), run);
  } else {
    run(0, static_cast<int64_t>(rows.size()));
  }
  return out;
}

std::span<const float> Sampler::PrepareRow(std::span<float> logits, const SamplerRow& row) const {
  EMBER_CHECK(row.params != nullptr);
  const SamplingParams& p = *row.params;
  RowScratch& scratch = ThreadScratch(vocab_size_);

  scratch.masked.clear();
  if (row.token_index < p.min_tokens) {
    if (!p.ignore_eos) scratch.masked.assign(eos_token_ids_.begin(), eos_token_ids_.end());
    scratch.masked.insert(scratch.masked.end(), p.stop_token_ids.begin(), p.stop_token_ids.end());
  }
  const bool repetition = p.repetition_penalty != 1.0f;
  const bool presence_frequency = p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
  const bool modifies = repetition || presence_frequency || !scratch.masked.empty();

  // Logprobs describe the raw logits, so keep a copy when this row changes them.
  std::span<const float> raw = logits;
  if (p.logprobs.has_value() && modifies) {
    scratch.raw_logits.assign(logits.begin(), logits.end());
    raw = scratch.raw_logits;
  }

  if (repetition) {
    ApplyRepetitionPenalty(p.repetition_penalty, row.prompt_token_ids, row.output_token_ids, logits, &scratch.seen);
  }
  if (presence_frequency) {
    ApplyPresenceFrequencyPenalties(p.presence_penalty, p.frequency_penalty, row.output_token_ids, logits,
                                    &scratch.counts);
  }
  MaskTokens(scratch.masked, logits);
  return raw;
}

SampledToken Sampler::SampleRow(std::span<float> logits, const SamplerRow& row) const {
  const SamplingParams& p = *row.params;
  const std::span<const float> raw = PrepareRow(logits, row);
  RowScratch& scratch = ThreadScratch(vocab_size_);
  SampledToken result;
  // Top-k/top-p/min-p never remove the most likely token, so greedy rows skip them. A row whose
  // every token is masked (stop_token_ids covering the vocabulary) falls back to argmax, id 0.
  if (p.greedy() || !FilterDistribution(logits, p.temperature, p.top_k, p.top_p, p.min_p, &scratch.filter,
                                        &scratch.dist)) {
    result.token_id = ArgMax(logits);
  } else {
    result.token_id = SampleFromDistribution(scratch.dist, SamplingUniform(row.seed, row.token_index));
  }
  if (p.logprobs.has_value()) result.logprobs = ComputeTokenLogprobs(raw, result.token_id, *p.logprobs);
  return result;
}

std::vector<VerifiedToken> Sampler::Verify(std::span<float> logits, std::span<const SamplerRow> rows,
                                           std::span<const DraftToVerify> drafts, ThreadPool* pool) const {
  EMBER_CHECK(rows.size() == drafts.size());
  EMBER_CHECK(static_cast<int64_t>(logits.size()) == static_cast<int64_t>(rows.size()) * vocab_size_);
  std::vector<VerifiedToken> out(rows.size());
  auto run = [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const size_t i = static_cast<size_t>(r);
      out[i] = VerifyRow(logits.subspan(i * static_cast<size_t>(vocab_size_), static_cast<size_t>(vocab_size_)),
                         rows[i], drafts[i]);
    }
  };
  if (pool != nullptr && rows.size() > 1) {
    pool->ParallelFor(static_cast<int64_t>(rows.size()), run);
  } else {
    run(0, static_cast<int64_t>(rows.size()));
  }
  return out;
}

VerifiedToken Sampler::VerifyRow(std::span<float> logits, const SamplerRow& row, const DraftToVerify& draft) const {
  if (draft.probabilities.empty()) {
    VerifiedToken coupled;
    coupled.token = SampleRow(logits, row);
    coupled.accepted = draft.token_id >= 0 && coupled.token.token_id == draft.token_id;
    return coupled;
  }
  const SamplingParams& p = *row.params;
  EMBER_CHECK(static_cast<int64_t>(draft.probabilities.size()) == vocab_size_);
  const std::span<const float> raw = PrepareRow(logits, row);
  RowScratch& scratch = ThreadScratch(vocab_size_);
  VerifiedToken result;
  if (p.greedy() || !FilterDistribution(logits, p.temperature, p.top_k, p.top_p, p.min_p, &scratch.filter,
                                        &scratch.dist)) {
    result.token.token_id = ArgMax(logits);
    result.accepted = result.token.token_id == draft.token_id;
  } else {
    const VerifyDecision d =
        VerifyAgainstDistribution(scratch.dist, draft.token_id, draft.probabilities, row.seed, row.token_index,
                                  &scratch.residual);
    result.accepted = d.accepted;
    result.token.token_id = d.token_id;
  }
  if (p.logprobs.has_value()) result.token.logprobs = ComputeTokenLogprobs(raw, result.token.token_id, *p.logprobs);
  return result;
}

}  // namespace ember
