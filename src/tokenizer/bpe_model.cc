#include "tokenizer/bpe_model.h"

#include <algorithm>
#include <cstdio>

#include "tokenizer/unicode.h"

namespace ember::tokenizer_internal {

// A symbol of the word being merged, linked to its live neighbours. id is the symbol id of its
// text (-1 for a lone character that neither the vocabulary nor any merge knows); a symbol
// merged into its left neighbour gets kDead.
struct BpeSymbol {
  int prev;
  int next;
  int32_t id;
  uint8_t byte;  // the input byte it started as, for the byte fallback of unknown symbols
};

namespace {

using Symbol = BpeSymbol;
constexpr int32_t kDead = -2;

struct Bigram {
  int left;
  int right;
  int rank;
  int32_t result;
  // Ids of both sides when queued: a symbol's id changes whenever it grows, so a changed id
  // means the pair is stale.
  int32_t left_id;
  int32_t right_id;
};

// Lowest rank first; among equal ranks the leftmost pair (the order llama.cpp and Hugging Face
// both use, so "aaa" with the rule "a a" becomes "aa a").
struct LaterBigram {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

uint64_t PairKey(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

}  // namespace

ByteToUnicode::ByteToUnicode() {
  reverse_.fill(-1);
  int next_extra = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    const uint32_t cp = printable ? static_cast<uint32_t>(b) : static_cast<uint32_t>(next_extra++);
    utf8_[b] = unicode::EncodeUtf8(cp);
    reverse_[cp] = static_cast<int16_t>(b);
  }
}

const ByteToUnicode& GetByteToUnicode() {
  static const ByteToUnicode* table = new ByteToUnicode();
  return *table;
}

int32_t BpeModel::SymbolId(const std::string& text) {
  const int32_t id = vocab_->Find(text);
  if (id >= 0) return id;
  auto [it, inserted] = extra_id_.emplace(text, vocab_->size() + static_cast<int32_t>(extra_text_.size()));
  if (inserted) extra_text_.push_back(text);
  return it->second;
}

Expected<BpeModel> BpeModel::Create(const Vocab* vocab, const std::vector<std::string>& merges,
                                    bool ignore_merges, Symbols symbols, int32_t unk_id) {
  BpeModel model;
  model.vocab_ = vocab;
  model.ignore_merges_ = ignore_merges;
  model.symbols_ = symbols;
  model.unk_id_ = unk_id;
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    model.byte_token_[b] = vocab->Find(name);
  }
  model.merges_.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string& m = merges[i];
    // The separator is the first space after the first character: a left part may itself be
    // a space (non-byte-level vocabularies), never empty.
    const size_t sep = m.empty() ? std::string::npos : m.find(' ', 1);
    if (sep == std::string::npos || sep + 1 == m.size()) {
      return InvalidArgument("BPE merge " + std::to_string(i) + " (\"" + m +
                             "\") is not two symbols separated by a space");
    }
    const std::string left = m.substr(0, sep);
    const std::string right = m.substr(sep + 1);
    const int32_t l = model.SymbolId(left);
    const int32_t r = model.SymbolId(right);
    const int32_t result = model.SymbolId(left + right);
    model.merges_.emplace(PairKey(l, r), Merge{static_cast<int>(i), result});
  }
  const auto& bytes = GetByteToUnicode();
  for (int b = 0; b < 256; ++b) {
    const int32_t id = vocab->Find(bytes.Encode(static_cast<uint8_t>(b)));
    if (id >= 0) {
      model.byte_symbol_[b] = id;
    } else {
      auto it = model.extra_id_.find(bytes.Encode(static_cast<uint8_t>(b)));
      model.byte_symbol_[b] = it == model.extra_id_.end() ? -1 : it->second;
    }
  }
  return model;
}

// Merges adjacent symbols, lowest rank first, until no pair of neighbours has a merge.
void BpeModel::MergeSymbols(std::vector<Symbol>* symbols_in) const {
  std::vector<Symbol>& symbols = *symbols_in;
  const int n = static_cast<int>(symbols.size());
  std::vector<Bigram> heap;
  heap.reserve(n);
  const LaterBigram later;
  auto try_pair = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const int32_t l = symbols[left].id, r = symbols[right].id;
    if (l < 0 || r < 0) return;
    auto it = merges_.find(PairKey(l, r));
    if (it == merges_.end()) return;
    heap.push_back({left, right, it->second.rank, it->second.result, l, r});
    std::push_heap(heap.begin(), heap.end(), later);
  };
  for (int i = 1; i < n; ++i) try_pair(i - 1, i);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const Bigram b = heap.back();
    heap.pop_back();
    Symbol& left = symbols[b.left];
    Symbol& right = symbols[b.right];
    if (left.id != b.left_id || right.id != b.right_id) continue;
    left.id = b.result;
    right.id = kDead;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = b.left;
    try_pair(left.prev, b.left);
    try_pair(b.left, left.next);
  }
}

void BpeModel::EncodeWord(std::string_view word, std::vector<int32_t>* out) const {
  if (word.empty()) return;
  if (symbols_ == Symbols::kCharacters) {
    EncodeCharacters(word, out);
    return;
  }
  const auto& bytes = GetByteToUnicode();
  if (ignore_merges_) {
    std::string encoded;
    for (char c : word) encoded += bytes.Encode(static_cast<uint8_t>(c));
    const int32_t id = vocab_->Find(encoded);
    if (id >= 0) {
      out->push_back(id);
      return;
    }
  }
  // One symbol per byte: each byte is one character of the byte-level encoding.
  const int n = static_cast<int>(word.size());
  std::vector<Symbol> symbols(n);
  for (int i = 0; i < n; ++i) {
    const auto b = static_cast<uint8_t>(word[i]);
    symbols[i] = {i - 1, i + 1 == n ? -1 : i + 1, byte_symbol_[b], b};
  }
  MergeSymbols(&symbols);

  const int32_t vocab_size = vocab_->size();
  for (int i = 0; i != -1; i = symbols[i].next) {
    const int32_t id = symbols[i].id;
    if (id >= 0 && id < vocab_size) {
      out->push_back(id);
      continue;
    }
    // Text the vocabulary lacks (a malformed model, or a byte whose character is no token):
    // llama.cpp then looks up each byte of the byte-level text as a one-byte token, and drops
    // those that are not tokens either.
    const std::string text = id < 0 ? bytes.Encode(symbols[i].byte) : extra_text_[id - vocab_size];
    for (char c : text) {
      const int32_t byte_id = vocab_->Find(std::string(1, c));
      if (byte_id >= 0) out->push_back(byte_id);
    }
  }
}

// tokenizers' BPE::merge_word with byte_fallback: a character the vocabulary has is one symbol;
// one it lacks becomes its <0xNN> byte tokens (each a symbol) if all of them exist, else the
// unknown token, consecutive unknowns fused into one. Then the same ranked merging.
void BpeModel::EncodeCharacters(std::string_view word, std::vector<int32_t>* out) const {
  if (ignore_merges_) {
    const int32_t id = vocab_->Find(word);
    if (id >= 0) {
      out->push_back(id);
      return;
    }
  }
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  bool last_unknown = false;
  auto push = [&](int32_t id) {
    const int index = static_cast<int>(symbols.size());
    if (index > 0) symbols.back().next = index;
    symbols.push_back({index - 1, -1, id, 0});
  };
  for (size_t offset = 0; offset < word.size();) {
    const size_t len = std::min(word.size() - offset,
                                unicode::SequenceLength(static_cast<uint8_t>(word[offset])));
    const std::string_view ch = word.substr(offset, len);
    offset += len;
    const int32_t id = vocab_->Find(ch);
    if (id >= 0) {
      push(id);
      last_unknown = false;
      continue;
    }
    bool all_bytes = true;
    for (char c : ch) all_bytes = all_bytes && byte_token_[static_cast<uint8_t>(c)] >= 0;
    if (all_bytes) {
      for (char c : ch) push(byte_token_[static_cast<uint8_t>(c)]);
      last_unknown = false;
    } else if (unk_id_ >= 0 && !last_unknown) {
      push(unk_id_);
      last_unknown = true;
    }
  }
  if (symbols.empty()) return;
  MergeSymbols(&symbols);
  const int32_t vocab_size = vocab_->size();
  for (int i = 0; i != -1; i = symbols[i].next) {
    const int32_t id = symbols[i].id;
    if (id >= 0 && id < vocab_size) {
      out->push_back(id);
    } else if (unk_id_ >= 0) {
      out->push_back(unk_id_);  // a merge whose result is no token (tokenizers refuses to load those)
    }
  }
}

}  // namespace ember::tokenizer_internal
