// Pre-tokenizers for byte-level BPE: the regexes that cut text into words before merging,
// implemented by hand (no regex engine) with exactly the semantics of a backtracking regex
// engine on these particular patterns.
//
// The patterns, by llama.cpp's "tokenizer.ggml.pre" name:
//   kGpt2   'gpt-2', 'gpt2', 'mpt', 'olmo', 'phi-2', 'jais':
//           's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   kDigitsThenGpt2   'smollm', 'starcoder', 'refact', 'command-r', 'codeshell', 'exaone',
//           'minerva': first \p{N} isolates every numeric character (Hugging Face's
//           Digits(individual_digits=true)), then kGpt2 runs inside each piece.
//   kLlama3 'llama3', 'llama-v3', 'llama-bpe', 'falcon3', 'pixtral', 'dbrx', 'smaug-bpe':
//           (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//           ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//   kQwen2  'qwen2', 'deepseek-r1-qwen', 'stablelm2': kLlama3 with \p{N} instead of \p{N}{1,3}.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ember::tokenizer_internal {

enum class PreTokenizer { kGpt2, kDigitsThenGpt2, kLlama3, kQwen2 };

struct PreTokenizerInfo {
  PreTokenizer kind;
  // llama.cpp skips merging for words that are whole vocabulary entries for these types
  // (its "ignore_merges"); Hugging Face's tokenizer.json says the same with model.ignore_merges.
  bool ignore_merges;
};

// The pre-tokenizer llama.cpp uses for a "tokenizer.ggml.pre" value, if ember has it.
std::optional<PreTokenizerInfo> LookUpPreTokenizer(std::string_view name);

// Splits `cps` (code points) into words; returns the length of each word in code points. The
// lengths add up to cps.size().
std::vector<size_t> SplitWords(PreTokenizer kind, const std::vector<uint32_t>& cps);

}  // namespace ember::tokenizer_internal
