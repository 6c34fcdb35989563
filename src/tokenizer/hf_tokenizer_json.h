// Hugging Face tokenizer.json -> TokenizerSpec, for model directories that ship one.
//
// Supported: model.type "BPE" with byte-level pre-processing, in the shapes real models use:
//   * pre_tokenizer ByteLevel(use_regex=true)                      -> "gpt2"
//   * Sequence[Digits(individual_digits=true), ByteLevel(use_regex=true)] -> "smollm"
//   * Sequence[Split(<llama3 or qwen2 regex>, Isolated), ByteLevel(use_regex=false)]
//                                                                  -> "llama3" / "qwen2"
// with merges as "a b" strings or [a, b] pairs, added_tokens (special ones become control
// tokens, the others user-defined), a ByteLevel (or no) decoder, no normalizer, and BOS/EOS
// taken from a TemplateProcessing post-processor. Everything else (SentencePiece-style BPE with
// a Metaspace/Replace normalizer, WordPiece, Unigram, add_prefix_space, dropout, lstrip/rstrip
// added tokens, ...) is reported as Unimplemented, naming what was found.
#pragma once

#include <filesystem>
#include <string_view>

#include "core/status.h"
#include "tokenizer/tokenizer.h"

namespace ember {

Expected<TokenizerSpec> TokenizerSpecFromHfJson(std::string_view json_text);

// Reads `path` (a tokenizer.json file) and parses it as above.
Expected<TokenizerSpec> LoadHfTokenizerJson(const std::filesystem::path& path);

}  // namespace ember
