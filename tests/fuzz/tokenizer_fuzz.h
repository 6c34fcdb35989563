// The shared body of bpe_tokenizer_fuzz (SmolLM2's byte-level BPE) and spm_tokenizer_fuzz
// (Gemma 3's SentencePiece-style BPE). Each runs a real model's tokenizer: the vocabulary
// fixtures of tests/unit/tokenizer/testdata (the GGUFs' tokenizer.ggml.* metadata, committed), so
// that a fresh clone fuzzes and replays without the 100+ MB model files.
//
// Input: one flags byte, then either text to encode (arbitrary bytes, invalid UTF-8 included) or
// token ids to decode (arbitrary int32s, out of range and negative included). Checked beyond "no
// crash, no sanitizer report":
//   * every id Encode returns is inside the vocabulary;
//   * Decode(Encode(text)) == text for valid UTF-8, which Tokenizer::Decode promises (for
//     SentencePiece with U+2581 read as a space, and not for text spelling a byte token such as
//     "<0x41>": llama.cpp merges that into the byte token too; for byte-level BPE only if every
//     byte of the text has a token: SmolLM2's vocabulary lacks 21 of them, 0x06 and 0xFF among
//     them, and Encode drops such bytes as llama.cpp does);
//   * IncrementalDetokenizer's pieces, concatenated with its Flush(), equal Decode.
#pragma once

#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/bpe_model.h"
#include "tokenizer/tokenizer.h"
#include "unit/tokenizer/tokenizer_fixtures.h"

namespace ember::fuzz {

// Built once per process (Gemma's 262k tokens take a few seconds under ASan).
inline const Tokenizer& FixtureTokenizer(const std::string& vocab_fixture) {
  static const Tokenizer* tokenizer = [&] {
    auto created = Tokenizer::Create(tokenizer_testing::ReadVocab(vocab_fixture));
    if (!created.ok()) std::abort();  // the harness itself failed, not the tokenizer
    return created->release();
  }();
  return *tokenizer;
}

// Well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF).
inline bool IsStrictUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<uint8_t>(s[i]);
    size_t len;
    uint32_t cp, min;
    if (b < 0x80) {
      ++i;
      continue;
    } else if ((b & 0xE0) == 0xC0) {
      len = 2, cp = b & 0x1F, min = 0x80;
    } else if ((b & 0xF0) == 0xE0) {
      len = 3, cp = b & 0x0F, min = 0x800;
    } else if ((b & 0xF8) == 0xF0) {
      len = 4, cp = b & 0x07, min = 0x10000;
    } else {
      return false;
    }
    if (i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k) {
      const auto c = static_cast<uint8_t>(s[i + k]);
      if ((c & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (c & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

// Byte-level BPE: whether every byte of `text` has a token of its own (its byte-level character).
inline bool EveryByteHasAToken(const Tokenizer& tok, std::string_view text) {
  static const auto* has = [&tok] {
    auto* table = new std::array<bool, 256>;
    const auto& bytes = tokenizer_internal::GetByteToUnicode();
    for (int b = 0; b < 256; ++b) (*table)[b] = tok.TokenId(bytes.Encode(static_cast<uint8_t>(b))).has_value();
    return table;
  }();
  for (char c : text) {
    if (!(*has)[static_cast<uint8_t>(c)]) return false;
  }
  return true;
}

inline void CheckIncremental(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip_special,
                             const std::string& decoded) {
  IncrementalDetokenizer stream(&tok, skip_special);
  std::string streamed;
  for (int32_t id : ids) streamed += stream.Add(id);
  streamed += stream.Flush();
  if (streamed != decoded) __builtin_trap();
}

inline int FuzzTokenizer(const Tokenizer& tok, bool sentencepiece, const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t flags = data[0];
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  const bool parse_special = flags & 1;
  const bool add_special = flags & 2;
  const bool skip_special = flags & 4;
  const int32_t n = tok.vocab_size();

  if (flags & 8) {
    // Decode arbitrary ids: raw int32s, or (more often useful) folded into [-1, n].
    std::vector<int32_t> ids(rest.size() / 4);
    if (!ids.empty()) std::memcpy(ids.data(), rest.data(), ids.size() * 4);
    if (!(flags & 16)) {
      for (int32_t& id : ids) id = static_cast<int32_t>(static_cast<uint32_t>(id) % (static_cast<uint32_t>(n) + 2)) - 1;
    }
    const std::string decoded = tok.Decode(ids, skip_special);
    CheckIncremental(tok, ids, skip_special, decoded);
    for (int32_t id : ids) {
      (void)tok.TokenText(id);
      (void)tok.TokenPiece(id, skip_special);
      (void)tok.IsSpecial(id);
    }
    return 0;
  }

  const std::vector<int32_t> ids = tok.Encode(rest, add_special, parse_special);
  for (int32_t id : ids) {
    if (id < 0 || id >= n) __builtin_trap();
  }
  const std::string decoded = tok.Decode(ids, skip_special);
  CheckIncremental(tok, ids, skip_special, decoded);
  if (!add_special && !skip_special && IsStrictUtf8(rest)) {
    std::string want(rest);
    if (!sentencepiece && !EveryByteHasAToken(tok, rest)) return 0;
    if (sentencepiece) {
      if (want.find("<0x") != std::string::npos) return 0;
      std::string spaced;
      for (size_t i = 0; i < want.size(); ++i) {
        const bool mark = want.compare(i, 3, "\xE2\x96\x81") == 0;
        spaced += mark ? ' ' : want[i];
        if (mark) i += 2;
      }
      want = std::move(spaced);
    }
    if (decoded != want) __builtin_trap();
  }
  if (tok.TokenId(rest)) (void)tok.TokenText(*tok.TokenId(rest));
  return 0;
}

}  // namespace ember::fuzz
