// Text <-> token ids for the two tokenizer families ember runs: byte-level BPE (GPT-2 style:
// SmolLM2, Llama 3, Qwen 2) and SentencePiece-style BPE with scores (Llama 2, Gemma).
//
// The behaviour is llama.cpp's, token for token (tests/unit/tokenizer checks a >1 MB corpus
// against llama.cpp's own output): given the GGUF tokenizer metadata in a TokenizerSpec, Encode
// returns what llama_tokenize returns and Decode concatenates what llama_token_to_piece returns.
//
//   EMBER_ASSIGN_OR_RETURN(auto tok, Tokenizer::Create(spec));
//   std::vector<int32_t> ids = tok->Encode("Hello", /*add_special=*/true, /*parse_special=*/true);
//   std::string text = tok->Decode(ids, /*skip_special=*/true);
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace ember {

namespace tokenizer_internal {
struct TokenizerState;
}  // namespace tokenizer_internal

// Everything a tokenizer is made of. Each field names the GGUF key that fills it; fields a
// GGUF lacks keep llama.cpp's defaults, noted per field.
struct TokenizerSpec {
  enum class Model {
    // "tokenizer.ggml.model" = "gpt2": byte-level BPE with ranked merges.
    kBytePairGpt2,
    // "tokenizer.ggml.model" = "llama": SentencePiece BPE driven by per-token scores, with
    // <0xNN> byte fallback.
    kSentencePieceBpe,
  };
  // GGUF token types ("tokenizer.ggml.token_type").
  enum TokenType : int32_t {
    kUndefined = 0,
    kNormal = 1,       // ordinary text
    kUnknown = 2,      // <unk>: special
    kControl = 3,      // <bos>, <|im_end|>, <start_of_turn>: special, matched only when parsing
    kUserDefined = 4,  // always matched as a whole string, decoded as its text
    kUnused = 5,       // decodes to nothing
    kByte = 6,         // <0xNN>: decodes to that byte
  };

  Model model = Model::kBytePairGpt2;
  // "tokenizer.ggml.pre": which pre-tokenizer regex splits text before BPE. Byte-level BPE
  // supports "smollm" (and its llama.cpp aliases "starcoder", "refact", "command-r", ...),
  // "gpt-2"/"gpt2", "llama3"/"llama-bpe", "qwen2" and "stablelm2"; SentencePiece ignores it
  // ("default").
  std::string pre_tokenizer;
  // "tokenizer.ggml.tokens": token text by id (byte-level BPE texts are byte-encoded, e.g.
  // "Ġthe"; SentencePiece texts use U+2581 for spaces). An empty text becomes "[EMPTY_<id>]",
  // as llama.cpp renames it.
  std::vector<std::string> tokens;
  // "tokenizer.ggml.scores": merge priority for SentencePiece (higher merges first). Empty
  // means all 0.
  std::vector<float> scores;
  // "tokenizer.ggml.token_type": TokenType by id. Empty means all kNormal.
  std::vector<int32_t> token_types;
  // "tokenizer.ggml.merges": "left right" pairs, highest priority first (byte-level BPE, and
  // SentencePiece-style BPE with Flavor::kHuggingFace).
  std::vector<std::string> merges;
  // "tokenizer.ggml.bos_token_id", "...eos_token_id", "...unknown_token_id",
  // "...padding_token_id"; -1 if none. Without the keys llama.cpp assumes bos 1, eos 2, unk 0
  // for "llama" vocabularies and bos = eos = 11 for "gpt2" ones.
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  int32_t unk_id = -1;
  int32_t pad_id = -1;
  // "tokenizer.ggml.add_bos_token" / "...add_eos_token": what Encode(add_special=true) adds.
  // Without the keys llama.cpp adds BOS for "llama" vocabularies (and for "llama3"-family
  // pre-tokenizers) and nothing for other "gpt2" ones.
  bool add_bos = false;
  bool add_eos = false;
  // "tokenizer.ggml.add_space_prefix" (SentencePiece only): prepend a space to text that
  // starts the input or follows a special token. llama.cpp's default is true for "llama"
  // vocabularies; Gemma 3 sets it false.
  bool add_space_prefix = false;
  // Byte-level BPE: emit a word that is a whole vocabulary entry as that token without
  // merging. No GGUF key: llama.cpp turns it on for the llama3 family, and Create() does the
  // same; tokenizer.json says it with model.ignore_merges.
  bool ignore_merges = false;

  // Whose behaviour Encode and Decode reproduce where llama.cpp and Hugging Face `tokenizers`
  // differ. GGUF vocabularies are llama.cpp's; a tokenizer.json is Hugging Face's, and
  // LoadHfTokenizerJson sets kHuggingFace. With kHuggingFace:
  //   * no llama.cpp attribute fix-ups (a token is special only if tokenizer.json says so);
  //   * added tokens are matched in the raw text, leftmost-longest in one pass (Hugging Face's
  //     AddedVocabulary), before spaces become U+2581, so a typed U+2581 is not a space there;
  //     a special token's text that is not parsed (parse_special off) stays raw text;
  //   * SentencePiece-style BPE merges by rank of `merges` (tokenizers' BPE model with
  //     byte_fallback) instead of by score, and every piece decodes with U+2581 as a space.
  enum class Flavor { kLlamaCpp, kHuggingFace };
  Flavor flavor = Flavor::kLlamaCpp;

  // The Model for a "tokenizer.ggml.model" value, or Unimplemented.
  static Expected<Model> ModelFromGgufName(std::string_view name);
};

class Tokenizer {
 public:
  // Checks the spec (sizes agree, ids in range, the pre-tokenizer is known) and builds the
  // lookup tables: about 0.15 s for a 262k-token vocabulary.
  static Expected<std::unique_ptr<Tokenizer>> Create(TokenizerSpec spec);
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Token ids for `text`. add_special adds BOS/EOS as the spec's add_bos/add_eos say.
  // parse_special turns the text of control tokens (e.g. "<|im_start|>", "<start_of_turn>")
  // into those tokens; without it they are tokenized as plain text. User-defined tokens are
  // always matched whole (llama.cpp and Hugging Face agree on that). Invalid UTF-8 is read as
  // U+FFFD by byte-level BPE and falls back to byte tokens in SentencePiece, as in llama.cpp.
  std::vector<int32_t> Encode(std::string_view text, bool add_special, bool parse_special) const;

  // The bytes the ids stand for, concatenated. skip_special drops control and unknown tokens
  // (BOS, <|im_end|>, ...); otherwise they appear as their text. Out-of-range ids decode to
  // nothing. With add_space_prefix, the space Encode prepended is removed again (from the
  // first text after the start or after a special token), so Decode(Encode(x)) == x for valid
  // UTF-8 (SentencePiece reads a literal U+2581 as a space; byte-level BPE drops bytes that have
  // no token, as llama.cpp does: SmolLM2's vocabulary lacks 21, e.g. 0x06 and 0xFF).
  std::string Decode(std::span<const int32_t> ids, bool skip_special) const;

  // The vocabulary text of `id` as stored ("Ġthe", "▁the", "<0x41>"); "" if out of range.
  std::string TokenText(int32_t id) const;
  // The bytes `id` decodes to on its own (no leading-space removal); "" if out of range.
  std::string TokenPiece(int32_t id, bool skip_special) const;
  // The id whose text is exactly `text`, if any.
  std::optional<int32_t> TokenId(std::string_view text) const;
  // Control or unknown: what skip_special drops.
  bool IsSpecial(int32_t id) const;

  int32_t vocab_size() const;
  int32_t bos_id() const { return spec_.bos_id; }
  int32_t eos_id() const { return spec_.eos_id; }
  int32_t pad_id() const { return spec_.pad_id; }
  int32_t unk_id() const { return spec_.unk_id; }
  const TokenizerSpec& spec() const { return spec_; }

 private:
  friend class IncrementalDetokenizer;
  Tokenizer(TokenizerSpec spec, std::unique_ptr<tokenizer_internal::TokenizerState> state);

  // Appends the bytes of `id` to `out`. `strip_space` carries the leading-space rule across
  // calls: true when the next text piece should lose one leading space.
  void AppendPiece(int32_t id, bool skip_special, bool* strip_space, std::string* out) const;

  TokenizerSpec spec_;
  std::unique_ptr<tokenizer_internal::TokenizerState> state_;
};

// Turns ids into text one id at a time, as they are generated, and returns only complete UTF-8:
// bytes of a character split across tokens (byte-fallback <0xNN> tokens, byte-level pieces)
// are held back until the character is whole. The concatenation of every Add() and a final
// Flush() equals Tokenizer::Decode of all the ids.
class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(const Tokenizer* tokenizer, bool skip_special = true);

  // The text completed by `id` (possibly empty).
  std::string Add(int32_t id);
  // Whatever is still held back, as raw bytes (an incomplete character at the end of
  // generation); the detokenizer then starts over as for a new sequence.
  std::string Flush();
  // Bytes held back right now.
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer* tokenizer_;
  bool skip_special_;
  bool strip_space_ = true;
  std::string pending_;
};

}  // namespace ember
