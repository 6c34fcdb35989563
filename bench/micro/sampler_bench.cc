// Sampler micro benchmarks: time per row for vocabularies of 49,152 (SmolLM2) and 262,144
// (Gemma 3), one thread, 8 rows per call. Read the per_row counter.
//   Greedy       temperature 0: one argmax pass
//   Temperature  temperature 1, no filters: one exp pass and an inverse-CDF walk over the vocabulary
//   TopK         temperature 0.8, top_k 50
//   TopP         temperature 0.8, top_p 0.95 on LM-like peaked logits (N(0, 3^2))
//   TopPFlat     the same on flat logits (N(0, 0.5^2)): the top-p cuts fall through to the slow ones
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

std::vector<float> Logits(int64_t vocab, double scale) {
  std::mt19937 rng(17);
  std::normal_distribution<float> normal(0.0f, static_cast<float>(scale));
  std::vector<float> logits(static_cast<size_t>(vocab * kRows));
  for (float& l : logits) l = normal(rng);
  return logits;
}

void RunSampler(benchmark::State& state, const SamplingParams& params, double scale) {
  const int64_t vocab = state.range(0);
  const Sampler sampler(vocab, {0});
  // Without penalties or min_tokens the sampler leaves the logits as they are, so one buffer
  // serves every iteration.
  std::vector<float> logits = Logits(vocab, scale);
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
  RunSampler(state, p, 3.0);
}

void BM_SamplerTemperature(benchmark::State& state) {
  RunSampler(state, SamplingParams(), 3.0);
}

void BM_SamplerTopK(benchmark::State& state) {
  SamplingParams p;
  p.temperature = 0.8f;
  p.top_k = 50;
  RunSampler(state, p, 3.0);
}

SamplingParams TopP() {
  SamplingParams p;
  p.temperature = 0.8f;
  p.top_p = 0.95f;
  return p;
}

void BM_SamplerTopP(benchmark::State& state) { RunSampler(state, TopP(), 3.0); }
void BM_SamplerTopPFlat(benchmark::State& state) { RunSampler(state, TopP(), 0.5); }

void BM_SamplerLogprobs(benchmark::State& state) {
  SamplingParams p = TopP();
  p.logprobs = 5;
  RunSampler(state, p, 3.0);
}

BENCHMARK(BM_SamplerGreedy)->Arg(49152)->Arg(262144)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SamplerTemperature)->Arg(49152)->Arg(262144)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SamplerTopK)->Arg(49152)->Arg(262144)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SamplerTopP)->Arg(49152)->Arg(262144)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SamplerTopPFlat)->Arg(49152)->Arg(262144)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SamplerLogprobs)->Arg(49152)->Arg(262144)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace ember
