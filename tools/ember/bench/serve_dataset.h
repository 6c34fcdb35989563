// The prompts `ember bench serve` sends, generated locally and deterministically from a seed, so
// two servers (or two runs) get exactly the same requests without shipping a dataset file.
//
//   random  prompts of about input_len tokens of common English words (each a single token with
//           its leading space in the BPE vocabularies we benchmark), lengths drawn uniformly in
//           [len * (1 - range_ratio), len * (1 + range_ratio)]
//   prefix  agentic sessions: all share one long prefix (prefix_len words, a stand-in for a
//           system prompt with tool descriptions) and run `turns` turns one after the other; each
//           turn's prompt is the whole history so far plus a new message of about input_len words
//   mixed   like random, but each prompt is long (about long_input_len tokens) with probability
//           long_fraction: short requests arriving behind long prompts, the load on which a
//           scheduler shows whether short prompts wait for long ones' prefill
//   code    like random, but the text is short Python functions (~24 tokens each)
//   edit    a Python file, then "the new version, with one variable renamed" and the first lines of
//           that answer: a good answer repeats almost all of the input (speculation by lookup pays)
//   quote   a passage of plain English sentences, then an instruction to quote it exactly (or
//           summarise it quoting its key sentences) and the first sentence of the answer
//
//   jsonl   a file (--dataset-path): one JSON object per line with "prompt" (the completion's prompt
//           text, sent as is: a chat-formatted prompt stays chat-formatted) and optionally
//           "output_len" (else --output-len); the first num_prompts lines, in order. Like vLLM's
//           custom dataset: real prompts where the generated ones would mislead (a drafter
//           trained on chat text drafts chat answers)
//
// edit and quote are plain completions (no chat template) that end inside the answer, so even a
// small model continues by copying; their output_len is about the copied text's length.
//
// Token counts are approximate; the reported input tokens come from the server's usage.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace ember::tools::bench {

// A small, fully specified generator (PCG-style LCG, 64-bit state): the same seed gives the same
// dataset on every platform and standard library (std::uniform_int_distribution does not).
class BenchRng {
 public:
  explicit BenchRng(uint64_t seed);
  uint64_t Next();
  // Uniform in [lo, hi] (inclusive), lo <= hi.
  int64_t UniformInt(int64_t lo, int64_t hi);
  // Uniform in [0, 1).
  double Uniform01();
  // Exponentially distributed with mean 1 / rate (Poisson arrivals).
  double Exponential(double rate);

 private:
  uint64_t state_;
};

struct DatasetOptions {
  std::string name = "random";  // random, mixed, prefix, code, edit, quote, jsonl
  std::string path;             // jsonl: the file
  int64_t num_prompts = 64;     // requests (prefix: sessions = num_prompts / turns, at least 1)
  int64_t input_len = 128;
  int64_t output_len = 64;
  double range_ratio = 0.0;     // in [0, 1)
  int64_t long_input_len = 2048;  // mixed: a long prompt's tokens
  double long_fraction = 0.25;    // mixed: the share of long prompts, in [0, 1]
  int64_t prefix_len = 1024;
  int64_t turns = 4;
  uint64_t seed = 0;
};

struct BenchRequest {
  std::string prompt;
  int64_t output_len = 0;
};

// Requests sent one after the other: one for random/code/edit/quote, `turns` for prefix.
struct Session {
  std::vector<BenchRequest> requests;
};

// Errors name the bad option (and, for jsonl, the bad line).
Expected<std::vector<Session>> BuildSessions(const DatasetOptions& options);
// The jsonl dataset from its text (what BuildSessions reads from options.path).
Expected<std::vector<Session>> JsonlSessions(std::string_view text, const DatasetOptions& options);

// Building blocks, exposed for tests.
// `words` words from the list, separated by single spaces.
std::string RandomWords(BenchRng& rng, int64_t words);
// Python functions until about `tokens` tokens.
std::string CodeText(BenchRng& rng, int64_t tokens);
// A Python file of loop functions until about `tokens` tokens; `local` gets the first function's
// local variable (the name the edit instruction renames).
std::string EditCode(BenchRng& rng, int64_t tokens, std::string* local);
// Plain English sentences until about `tokens` tokens, one paragraph.
std::string PassageText(BenchRng& rng, int64_t tokens);
// Uniform in [max(1, mean * (1 - ratio)), max(1, mean * (1 + ratio))].
int64_t SampleLength(BenchRng& rng, int64_t mean, double ratio);

}  // namespace ember::tools::bench
