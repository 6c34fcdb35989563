#include "runner/sampler/logprobs.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "core/check.h"
#include "runner/sampler/fast_exp.h"

namespace ember {
namespace {

// Higher logit first; equal logits by lower id.
bool Better(const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
  return a.first > b.first || (a.first == b.first && a.second < b.second);
}

}  // namespace

TokenLogprobs ComputeTokenLogprobs(std::span<const float> logits, int32_t token, int32_t num_top) {
  const int64_t vocab = static_cast<int64_t>(logits.size());
  EMBER_CHECK(token >= 0 && token < vocab, "token {} outside the vocabulary of {}", token, vocab);
  EMBER_CHECK(num_top >= 0);
  const float max_logit = MaxValue(logits);
  // Float exps within 2 ulps summed in double: the log-sum-exp is good to ~1e-7.
  const double log_sum_exp = static_cast<double>(max_logit) + std::log(SumExpShifted(logits, max_logit, 1.0f));

  TokenLogprobs out;
  out.logprob = static_cast<float>(logits[static_cast<size_t>(token)] - log_sum_exp);
  const int64_t k = std::min<int64_t>(num_top, vocab);
  if (k == 0) return out;
  // A heap whose top is the worst of the best k so far. Tokens come in increasing id order, so a
  // later token beats it only with a strictly larger logit, and whole chunks at or below it are
  // skipped after a vectorized max.
  constexpr int64_t kChunk = 32;
  std::vector<std::pair<float, int32_t>> heap;
  heap.reserve(static_cast<size_t>(k));
  for (int64_t i = 0; i < vocab;) {
    if (static_cast<int64_t>(heap.size()) == k && i + kChunk <= vocab &&
        MaxOrderKey(logits.data() + i, kChunk) <= FloatOrderKey(heap.front().first)) {
      i += kChunk;
      continue;
    }
    for (const int64_t end = std::min(vocab, i + kChunk); i < end; ++i) {
      const std::pair<float, int32_t> entry(logits[static_cast<size_t>(i)], static_cast<int32_t>(i));
      if (static_cast<int64_t>(heap.size()) < k) {
        heap.push_back(entry);
        std::push_heap(heap.begin(), heap.end(), Better);
      } else if (Better(entry, heap.front())) {
        std::pop_heap(heap.begin(), heap.end(), Better);
        heap.back() = entry;
        std::push_heap(heap.begin(), heap.end(), Better);
      }
    }
  }
  std::sort_heap(heap.begin(), heap.end(), Better);
  for (const auto& [logit, id] : heap) {
    out.top_ids.push_back(id);
    out.top_logprobs.push_back(static_cast<float>(logit - log_sum_exp));
  }
  return out;
}

std::vector<TokenLogprobs> ComputeRowLogprobs(std::span<const float> logits, std::span<const int32_t> tokens,
                                              int32_t num_top, ThreadPool* pool) {
  std::vector<TokenLogprobs> out(tokens.size());
  if (tokens.empty()) return out;
  EMBER_CHECK(logits.size() % tokens.size() == 0, "{} logits for {} rows", logits.size(), tokens.size());
  const size_t vocab = logits.size() / tokens.size();
  auto run = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const auto row = static_cast<size_t>(i);
      out[row] = ComputeTokenLogprobs(logits.subspan(row * vocab, vocab), tokens[row], num_top);
    }
  };
  if (pool != nullptr && tokens.size() > 1) {
    pool->ParallelFor(static_cast<int64_t>(tokens.size()), run);
  } else {
    run(0, static_cast<int64_t>(tokens.size()));
  }
  return out;
}

}  // namespace ember
