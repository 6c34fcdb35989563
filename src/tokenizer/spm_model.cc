#include "tokenizer/spm_model.h"

#include <algorithm>
#include <cstdio>
#include <queue>

#include "tokenizer/unicode.h"

namespace ember::tokenizer_internal {
namespace {

struct Symbol {
  int prev;
  int next;
  size_t start;
  size_t len;  // 0 once merged into the left neighbour
};

struct Bigram {
  int left;
  int right;
  float score;
  size_t size;  // bytes of the merged text; symbols only grow, so a change means stale
};

// Highest score first; among equal scores the leftmost pair.
struct WorseBigram {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

class Session {
 public:
  Session(const Vocab& vocab, const SpmModel& model, const std::string& text)
      : vocab_(vocab), model_(model), text_(text) {}

  void Run(std::vector<int32_t>* out) {
    // Symbols are cut by the lead byte's length alone (a stray continuation byte is a symbol
    // of its own); only whole symbols ever merge.
    for (size_t offset = 0; offset < text_.size();) {
      const size_t len = std::min(text_.size() - offset,
                                  unicode::SequenceLength(static_cast<uint8_t>(text_[offset])));
      const int index = static_cast<int>(symbols_.size());
      symbols_.push_back({index - 1, offset + len == text_.size() ? -1 : index + 1, offset, len});
      offset += len;
    }
    for (int i = 1; i < static_cast<int>(symbols_.size()); ++i) TryPair(i - 1, i);

    while (!queue_.empty()) {
      const Bigram b = queue_.top();
      queue_.pop();
      Symbol& left = symbols_[b.left];
      Symbol& right = symbols_[b.right];
      if (left.len == 0 || right.len == 0 || left.len + right.len != b.size) continue;
      left.len += right.len;
      right.len = 0;
      left.next = right.next;
      if (right.next >= 0) symbols_[right.next].prev = b.left;
      TryPair(left.prev, b.left);
      TryPair(b.left, left.next);
    }
    if (symbols_.empty()) return;
    for (int i = 0; i != -1; i = symbols_[i].next) Emit(symbols_[i].start, symbols_[i].len, out);
  }

 private:
  void TryPair(int left, int right) {
    if (left < 0 || right < 0) return;
    const std::string_view merged = std::string_view(text_).substr(
        symbols_[left].start, symbols_[left].len + symbols_[right].len);
    const int32_t id = vocab_.Find(merged);
    if (id < 0) return;
    // Any vocabulary entry counts, whatever its type: llama.cpp does not filter here either.
    queue_.push({left, right, vocab_.score[id], merged.size()});
  }

  // Every merged piece is a vocabulary entry (a pair is only queued if it is one), so only a
  // lone character can lack a token; it falls back to one token per byte. (llama.cpp also keeps
  // a map to split merged pieces back apart, which this invariant makes unreachable.)
  void Emit(size_t start, size_t len, std::vector<int32_t>* out) const {
    const std::string_view piece = std::string_view(text_).substr(start, len);
    const int32_t id = vocab_.Find(piece);
    if (id >= 0) {
      out->push_back(id);
      return;
    }
    for (char c : piece) {
      const int32_t byte_id = model_.ByteToken(static_cast<uint8_t>(c));
      if (byte_id >= 0) out->push_back(byte_id);
    }
  }

  const Vocab& vocab_;
  const SpmModel& model_;
  const std::string& text_;
  std::vector<Symbol> symbols_;
  std::priority_queue<Bigram, std::vector<Bigram>, WorseBigram> queue_;
};

}  // namespace

SpmModel::SpmModel(const Vocab* vocab) : vocab_(vocab) {
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    int32_t id = vocab_->Find(name);
    if (id < 0) id = vocab_->Find(std::string(1, static_cast<char>(b)));
    byte_tokens_[b] = id;
  }
}

void SpmModel::Encode(const std::string& text, std::vector<int32_t>* out) const {
  Session(*vocab_, *this, text).Run(out);
}

}  // namespace ember::tokenizer_internal
