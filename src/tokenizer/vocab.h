// The vocabulary as the tokenizer algorithms see it: text, score and attributes by id, and the
// id of a text. Internal to src/tokenizer.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ember::tokenizer_internal {

// Token attributes, derived from the GGUF token types (llama.cpp's llama_token_attr, of which
// only the bits that change encoding or decoding are kept).
enum TokenAttr : uint8_t {
  kAttrUndefined = 0,
  kAttrNormal = 1 << 0,
  kAttrUnknown = 1 << 1,
  kAttrControl = 1 << 2,
  kAttrUserDefined = 1 << 3,
  kAttrUnused = 1 << 4,
  kAttrByte = 1 << 5,
};

// Text -> id, open addressing over the texts of a Vocab. Merging asks "is this pair's text a
// token?" for every candidate pair, mostly with "no" for an answer; a flat table answers a miss
// with one cache line (a 32-bit hash tag beside the id), where std::unordered_map walks nodes.
class TextIndex {
 public:
  void Build(const std::vector<std::string>& texts) {
    texts_ = &texts;
    size_t capacity = 16;
    while (capacity < texts.size() * 2) capacity <<= 1;
    slots_.assign(capacity, 0);
    mask_ = capacity - 1;
    // When two ids share a text the later id wins, as in llama.cpp.
    for (size_t id = 0; id < texts.size(); ++id) {
      const uint64_t h = Hash(texts[id]);
      size_t i = h & mask_;
      while (slots_[i] != 0 && !SameText(slots_[i], h, texts[id])) i = (i + 1) & mask_;
      slots_[i] = (h & 0xFFFFFFFF00000000ull) | (id + 1);
    }
  }

  int32_t Find(std::string_view s) const {
    const uint64_t h = Hash(s);
    for (size_t i = h & mask_; slots_[i] != 0; i = (i + 1) & mask_) {
      if (SameText(slots_[i], h, s)) return static_cast<int32_t>((slots_[i] & 0xFFFFFFFF) - 1);
    }
    return -1;
  }

 private:
  static uint64_t Hash(std::string_view s) {
    uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a, then a final mix so low bits spread
    for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 32);
  }
  bool SameText(uint64_t slot, uint64_t h, std::string_view s) const {
    return (slot >> 32) == (h >> 32) && (*texts_)[(slot & 0xFFFFFFFF) - 1] == s;
  }

  const std::vector<std::string>* texts_ = nullptr;
  std::vector<uint64_t> slots_;  // (hash high 32 bits) << 32 | (id + 1); 0 is empty
  size_t mask_ = 0;
};

struct Vocab {
  std::vector<std::string> text;
  std::vector<float> score;
  std::vector<uint8_t> attr;
  TextIndex index;  // built over `text` once it is final

  int32_t size() const { return static_cast<int32_t>(text.size()); }
  int32_t Find(std::string_view s) const { return index.Find(s); }
};

}  // namespace ember::tokenizer_internal
