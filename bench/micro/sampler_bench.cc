// Sampler micro benchmarks: time per row for vocabularies of 49,152 (SmolLM2) and 262,144
// (Gemma 3), one thread, 8 rows per call. Read the per_row counter.
//   Greedy       temperature 0: one argmax pass
//   Temperature  temperature 1, no filters: one exp pass and an inverse-CDF walk over the vocabulary
//   TopK         temperature 0.8, top_k 50
//   TopP         temperature 0.8, top_p 0.95 on LM-like logits: N(0, 2^2) plus a head of 16 tokens
//                20 to 12.5 above the rest (the head holds nearly all the mass, as usual for an LM)
//   TopPWide     the same on N(0, 3^2) with no head: the nucleus spans ~10^4 tokens
//   TopPFlat     the same on N(0, 0.5^2): the nucleus is most of the vocabulary
//   Logprobs     TopP plus logprobs = 5 (one more pass for the log-sum-exp and a top-5 heap)
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "engine/sampling_params.h"
#include "runner/sampler/sampler.h"

namespace ember {
namespace {

constexpr int kRows = 8;

std::vector<float> Logits(int64_t vocab, double scale, bool head) {
  std::mt19937 rng(17);
  std::normal_distribution<float> normal(0.0f, static_cast<float>(scale));
  std::vector<float> logits(static_cast<size_t>(vocab * kRows));
  for (float& l : logits) l = normal(rng);
  if (head) {
    for (int64_t r = 0; r < kRows; ++r) {
      for (int64_t i = 0; i < 16; ++i) {
        logits[static_cast<size_t>(r * vocab + (i * 7919 + r * 31) % vocab)] += 20.0f - 0.5f * static_cast<float>(i);
      }
    }
  }
  return logits;
}

void RunSampler(benchmark::State& state, const SamplingParams& params, double scale, bool head = true) {
  const int64_t vocab = state.range(0);
  const Sampler sampler(vocab, {0});
  // Without penalties or min_tokens the sampler leaves the logits as they are, so one buffer
  // serves every iteration.
  std::vector<float> logits = Logits(vocab, scale, head);
  std::vector<SamplerRow> rows(kRows);
  int64_t step = 0;
  for (auto _ : state) {
    for (int r = 0; r < kRows; ++r) {
      rows[static_cast<size_t>(r)].params = &params;
      rows[static_cast<size_t>(r)].seed = static_cast<uint64_t>(r);
      rows[static_cast<size_t>(r)].token_index = step;
    }
    benchmark::DoNotOptimize(sampler.Sample(logits, rows));
    ++step;
  }
  state.counters["per_row"] =
      benchmark::Counter(kRows, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void BM_SamplerGreedy(benchmark::State& state) {
  SamplingParams p;
  p.temperature = 0.0f;
  RunSampler(state, p, 2.0);
}

void BM_SamplerTemperature(benchmark::State& state) { RunSampler(state, SamplingParams(), 2.0); }

void BM_SamplerTopK(benchmark::State& state) {
  SamplingParams p;
  p.temperature = 0.8f;
  p.top_k = 50;
  RunSampler(state, p, 2.0);
}

SamplingParams TopP() {
  SamplingParams p;
  p.temperature = 0.8f;
  p.top_p = 0.95f;
  return p;
}

void BM_SamplerTopP(benchmark::State& state) { RunSampler(state, TopP(), 2.0); }
void BM_SamplerTopPWide(benchmark::State& state) { RunSampler(state, TopP(), 3.0, false); }
void BM_SamplerTopPFlat(benchmark::State& state) { RunSampler(state, TopP(), 0.5, false); }

void BM_SamplerLogprobs(benchmark::State& state) {
  SamplingParams p = TopP();
  p.logprobs = 5;
  RunSampler(state, p, 2.0);
}

BENCHMARK(BM_SamplerGreedy)->Arg(49152)->Arg(262144)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SamplerTemperature)->Arg(49152)->Arg(262144)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SamplerTopK)->Arg(49152)->Arg(262144)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SamplerTopP)->Arg(49152)->Arg(262144)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SamplerTopPWide)->Arg(49152)->Arg(262144)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SamplerTopPFlat)->Arg(49152)->Arg(262144)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SamplerLogprobs)->Arg(49152)->Arg(262144)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace ember
