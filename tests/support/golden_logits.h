// Logits fixtures written by the reference scripts (scripts/make_muse_golden.py,
// scripts/make_hf_dense_golden.py): golden.json names the prompt, the greedy continuation and two
// raw little-endian f32 files of [tokens, vocab] logits beside it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ember::test {

struct GoldenLogits {
  std::string dir;
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> greedy_ids;
  int64_t vocab_size = 0;
  std::vector<float> logits;         // [prompt, vocab]
  std::vector<float> greedy_logits;  // [greedy, vocab]
};

// A whole file of raw f32 values (a gtest failure when it cannot be opened).
std::vector<float> ReadFloats(const std::string& path);
// The fixture in `dir` (a gtest failure when it is missing or its sizes disagree).
GoldenLogits LoadGoldenLogits(const std::string& dir);
// Worst |ours - ref| / max(1, max|ref|) over `rows` rows of `vocab` logits.
float WorstRelativeError(const float* ours, const float* ref, int64_t rows, int64_t vocab);
// Worst |ours - ref| over a row of `width`, relative to that row's largest |ref|, over all rows
// (the encoders' fixtures); a gtest failure and infinity when the sizes differ.
float WorstRowRelative(const std::vector<float>& ours, const std::vector<float>& ref, int64_t width);

}  // namespace ember::test
