// Byte-level BPE (GPT-2 style): bytes are first mapped to printable code points, then adjacent
// symbols are merged in order of merge rank (lowest first). Internal to src/tokenizer.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "tokenizer/vocab.h"

namespace ember::tokenizer_internal {

// GPT-2's byte <-> code point table: printable Latin-1 bytes map to themselves, the other 68
// bytes to U+0100 onwards in byte order, so that every byte string becomes printable text.
class ByteToUnicode {
 public:
  ByteToUnicode();
  // UTF-8 of the code point that stands for `byte`.
  const std::string& Encode(uint8_t byte) const { return utf8_[byte]; }
  // The byte a code point stands for, or -1 if it stands for none.
  int Decode(uint32_t cp) const { return cp < reverse_.size() ? reverse_[cp] : -1; }

 private:
  std::array<std::string, 256> utf8_;
  std::array<int16_t, 324> reverse_;  // the largest mapped code point is U+0143
};

const ByteToUnicode& GetByteToUnicode();

struct BpeSymbol;  // a symbol of the word being merged (bpe_model.cc)

class BpeModel {
 public:
  // `merges` are "left right" strings, rank = index; a repeated pair keeps its first rank.
  // Symbols are what merging starts from: kByteLevel maps each byte to its GPT-2 code point;
  // kCharacters (Hugging Face's BPE over SentencePiece vocabularies) starts from the UTF-8
  // characters of the text and falls back to <0xNN> byte tokens (else `unk_id`) for a
  // character the vocabulary lacks, as tokenizers' byte_fallback does.
  enum class Symbols { kByteLevel, kCharacters };
  static Expected<BpeModel> Create(const Vocab* vocab, const std::vector<std::string>& merges,
                                   bool ignore_merges, Symbols symbols = Symbols::kByteLevel,
                                   int32_t unk_id = -1);

  // Appends the ids of one pre-tokenized word, given as its raw UTF-8 bytes (the byte-level
  // encoding is applied here; kCharacters takes the text with spaces already U+2581).
  void EncodeWord(std::string_view word, std::vector<int32_t>* out) const;

 private:
  struct Merge {
    int rank;
    int32_t result;  // symbol id of left + right
  };

  int32_t SymbolId(const std::string& text);
  void MergeSymbols(std::vector<BpeSymbol>* symbols) const;
  void EncodeCharacters(std::string_view word, std::vector<int32_t>* out) const;

  const Vocab* vocab_ = nullptr;
  bool ignore_merges_ = false;
  Symbols symbols_ = Symbols::kByteLevel;
  int32_t unk_id_ = -1;
  std::array<int32_t, 256> byte_token_{};  // kCharacters: the id of "<0xNN>", or -1
  // Merging works on symbol ids instead of strings: ids below the vocabulary size are tokens;
  // strings that occur in merges without being tokens get ids past the end (extra_text_), so
  // merging behaves exactly as llama.cpp's string-keyed version, merges of non-tokens included.
  std::vector<std::string> extra_text_;
  std::unordered_map<std::string, int32_t> extra_id_;
  std::array<int32_t, 256> byte_symbol_{};  // symbol of each byte's one-character encoding
  std::unordered_map<uint64_t, Merge> merges_;  // (left << 32 | right) -> merge
};

}  // namespace ember::tokenizer_internal
