// SentencePiece-style BPE as llama.cpp runs it for "llama" vocabularies (Llama 2, Gemma):
// characters are merged pairwise, always the adjacent pair whose concatenation is the
// vocabulary entry with the highest score; characters no entry covers fall back to <0xNN> byte
// tokens. Internal to src/tokenizer.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/vocab.h"

namespace ember::tokenizer_internal {

class SpmModel {
 public:
  explicit SpmModel(const Vocab* vocab);

  // Appends the ids of `text`, whose spaces are already U+2581.
  void Encode(const std::string& text, std::vector<int32_t>* out) const;

  // The token for one byte: "<0xNN>", else the byte itself as a token, else -1.
  int32_t ByteToken(uint8_t byte) const { return byte_tokens_[byte]; }

 private:
  const Vocab* vocab_;
  std::array<int32_t, 256> byte_tokens_;
};

}  // namespace ember::tokenizer_internal
