// Hugging Face tokenizer.json -> TokenizerSpec, for model directories that ship one.
//
// Supported: model.type "BPE" in two families.
//
// Byte-level, in the shapes real models use:
//   * pre_tokenizer ByteLevel(use_regex=true)                      -> "gpt2"
//   * Sequence[Digits(individual_digits=true), ByteLevel(use_regex=true)] -> "smollm"
//   * Sequence[Split(<llama3 or qwen2 regex>, Isolated), ByteLevel(use_regex=false)]
//                                                                  -> "llama3" / "qwen2"
// with a ByteLevel (or no) decoder and no normalizer.
//
// SentencePiece-style (Gemma's layout): normalizer Replace(" " -> U+2581), byte_fallback, no
// pre_tokenizer or a Split on " " (which finds nothing once spaces are U+2581), decoder
// Sequence[Replace(U+2581 -> " "), ByteFallback, Fuse]; <0xNN> pieces become byte tokens. This
// becomes a TokenizerSpec::Model::kSentencePieceBpe that merges by the merges' ranks.
//
// Both: merges as "a b" strings or [a, b] pairs, added_tokens (special ones become control
// tokens, the others user-defined), BOS/EOS taken from a TemplateProcessing post-processor, and
// TokenizerSpec::Flavor::kHuggingFace (added tokens matched as tokenizers matches them). Anything
// else (Metaspace, Prepend or Precompiled normalizers, WordPiece, Unigram, add_prefix_space,
// dropout, lstrip/rstrip or normalized added tokens, a Strip decoder, ...) is reported as
// Unimplemented, naming what was found.
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
