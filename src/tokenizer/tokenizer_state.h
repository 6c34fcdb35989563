// What a Tokenizer holds besides its spec. Internal to src/tokenizer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/bpe_model.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/spm_model.h"
#include "tokenizer/vocab.h"

namespace ember::tokenizer_internal {

// A byte trie over the texts of the special tokens, to find which of them occur in a text in
// one pass (Gemma 3 has 6,400 of them; testing each with a substring search would dominate).
class SpecialTokenTrie {
 public:
  void Insert(std::string_view text, int32_t id);
  // Calls found(id) for every special token that occurs somewhere in `text` (possibly more
  // than once for the same id).
  template <typename F>
  void ForEachOccurring(std::string_view text, F found) const {
    for (size_t i = 0; i < text.size(); ++i) {
      int node = 0;
      for (size_t j = i; j < text.size(); ++j) {
        node = Child(node, static_cast<uint8_t>(text[j]));
        if (node < 0) break;
        if (nodes_[node].id >= 0) found(nodes_[node].id);
      }
    }
  }

  // The longest special token that starts at text[at], as {id, length}; {-1, 0} if none.
  std::pair<int32_t, size_t> LongestAt(std::string_view text, size_t at) const {
    std::pair<int32_t, size_t> best{-1, 0};
    int node = 0;
    for (size_t j = at; j < text.size(); ++j) {
      node = Child(node, static_cast<uint8_t>(text[j]));
      if (node < 0) break;
      if (nodes_[node].id >= 0) best = {nodes_[node].id, j + 1 - at};
    }
    return best;
  }

 private:
  struct Node {
    int32_t id = -1;
    std::vector<std::pair<uint8_t, int>> children;  // sorted by byte
  };
  int Child(int node, uint8_t byte) const;

  std::vector<Node> nodes_ = std::vector<Node>(1);
};

struct TokenizerState {
  Vocab vocab;
  std::optional<PreTokenizerInfo> pre;  // byte-level BPE only
  std::optional<BpeModel> bpe;  // byte-level BPE; also SentencePiece with Flavor::kHuggingFace
  std::optional<SpmModel> spm;
  // Control, user-defined and unknown tokens: the ones matched as whole strings before the
  // model runs. Longest text first, then lowest id.
  std::vector<int32_t> special_by_length;
  std::vector<int32_t> special_rank;  // id -> position in special_by_length, or -1
  SpecialTokenTrie special_trie;
  // id -> the text matched for a special token: its vocabulary text, with spaces escaped to
  // U+2581 for llama.cpp-flavoured SentencePiece (which matches in escaped text); "" for other
  // tokens.
  std::vector<std::string> special_text;
  // What each token decodes to when special tokens are kept.
  std::vector<std::string> piece;
};

}  // namespace ember::tokenizer_internal
