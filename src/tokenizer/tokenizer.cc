#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <string>
#include <utility>

#include "tokenizer/tokenizer_state.h"
#include "tokenizer/unicode.h"

namespace ember {

using tokenizer_internal::BpeModel;
using tokenizer_internal::GetByteToUnicode;
using tokenizer_internal::SpmModel;
using tokenizer_internal::TokenizerState;
using tokenizer_internal::Vocab;
namespace ti = tokenizer_internal;

namespace {

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581, SentencePiece's space

uint8_t AttrOfType(int32_t type) {
  switch (type) {
    case TokenizerSpec::kNormal: return ti::kAttrNormal;
    case TokenizerSpec::kUnknown: return ti::kAttrUnknown;
    case TokenizerSpec::kControl: return ti::kAttrControl;
    case TokenizerSpec::kUserDefined: return ti::kAttrUserDefined;
    case TokenizerSpec::kUnused: return ti::kAttrUnused;
    case TokenizerSpec::kByte: return ti::kAttrByte;
    default: return ti::kAttrUndefined;
  }
}

// llama.cpp fixes up token attributes at load time by the token's text: end-of-generation and
// fill-in-the-middle tokens that a converter left as normal or user-defined become control
// tokens (so e.g. Gemma 3's user-defined "</s>" is not matched without parse_special, and is
// hidden when decoding with skip_special), and a few gpt-oss / Gemma 4 exceptions go the other
// way. Ember must do the same to tokenize the same.
constexpr std::string_view kControlLookingNames[] = {
    // end of turn / generation
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>", "[e~[",
    // fill in the middle
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<PRE>", "\xE2\x96\x81<PRE>",
    "<|code_prefix|>", "<|prefix|>", "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<SUF>",
    "\xE2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>", "<|fim_middle|>", "<fim-middle>",
    "<fim_middle>", "<MID>", "\xE2\x96\x81<MID>", "<|code_middle|>", "<|middle|>",
    "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", "<|fim_repo|>", "<|repo_name|>",
    "<fim-repo>", "<REPO>", "<reponame>", "<|file_sep|>",
    "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>",
    "<\xEF\xBD\x9C" "fim\xE2\x96\x81hole\xEF\xBD\x9C>",
    "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>",
};

void ApplyLlamaCppAttrFixups(Vocab* v) {
  for (std::string_view name : kControlLookingNames) {
    const int32_t id = v->Find(name);
    if (id >= 0) v->attr[id] |= ti::kAttrControl;
  }
  for (std::string_view name : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}) {
    const int32_t id = v->Find(name);
    if (id >= 0) v->attr[id] = ti::kAttrUserDefined;
  }
  auto has = [&](const char* name) { return v->Find(name) >= 0; };
  if (has("<|end|>") && ((has("<|return|>") && has("<|call|>")) ||
                         (has("<|calls|>") && has("<|flush|>")))) {
    v->attr[v->Find("<|end|>")] = ti::kAttrUserDefined;
  }
  if (has("</s>") && has("<|tool_response>")) v->attr[v->Find("</s>")] = ti::kAttrNormal;
}

// SentencePiece's whitespace escaping: every space becomes U+2581.
std::string EscapeSpaces(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == ' ') {
      out.append(kSpaceMark);
    } else {
      out.push_back(c);
    }
  }
  return out;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// "<0xNN>"; a byte token with any other text (a malformed vocabulary) decodes to nothing.
std::string DecodeBytePiece(const std::string& text) {
  if (text.size() != 6 || text.compare(0, 3, "<0x") != 0 || text[5] != '>') return "";
  const int high = HexDigit(text[3]), low = HexDigit(text[4]);
  if (high < 0 || low < 0) return "";
  return std::string(1, static_cast<char>(high * 16 + low));
}

// SentencePiece's decoding of a piece: every U+2581 is a space.
std::string UnescapeSpaces(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    if (text.compare(i, kSpaceMark.size(), kSpaceMark) == 0) {
      out.push_back(' ');
      i += kSpaceMark.size();
    } else {
      out.push_back(text[i++]);
    }
  }
  return out;
}

std::string PieceOf(const TokenizerSpec& spec, const Vocab& v, int32_t id) {
  const uint8_t attr = v.attr[id];
  const std::string& text = v.text[id];
  const bool spm = spec.model == TokenizerSpec::Model::kSentencePieceBpe;
  if (attr & (ti::kAttrUnknown | ti::kAttrControl | ti::kAttrUserDefined)) {
    // Hugging Face's decoder chain (Replace U+2581 -> space, ...) runs over added tokens too.
    return spm && spec.flavor == TokenizerSpec::Flavor::kHuggingFace ? UnescapeSpaces(text) : text;
  }
  if (attr & ti::kAttrNormal) {
    if (spm) return UnescapeSpaces(text);
    // Byte-level: each code point stands for one byte. One that stands for none (not in a
    // well-formed vocabulary) is passed through as its UTF-8.
    std::string out;
    const auto& table = GetByteToUnicode();
    for (uint32_t cp : unicode::DecodeUtf8(text)) {
      const int byte = table.Decode(cp);
      if (byte >= 0) {
        out.push_back(static_cast<char>(byte));
      } else {
        unicode::AppendUtf8(cp, &out);
      }
    }
    return out;
  }
  if (attr & ti::kAttrByte) return DecodeBytePiece(text);
  return "";  // unused and undefined tokens decode to nothing, as in llama.cpp
}

Status CheckId(const char* what, int32_t id, size_t n) {
  if (id < -1 || id >= static_cast<int64_t>(n)) {
    return InvalidArgument(std::string("tokenizer ") + what + " id " + std::to_string(id) +
                           " is outside the vocabulary of " + std::to_string(n) + " tokens");
  }
  return Status::Ok();
}

struct Fragment {
  int32_t token;  // -1 for raw text
  size_t offset;
  size_t length;
};

}  // namespace

namespace tokenizer_internal {

int SpecialTokenTrie::Child(int node, uint8_t byte) const {
  const auto& children = nodes_[node].children;
  auto it = std::lower_bound(children.begin(), children.end(), byte,
                             [](const std::pair<uint8_t, int>& c, uint8_t b) { return c.first < b; });
  return (it != children.end() && it->first == byte) ? it->second : -1;
}

void SpecialTokenTrie::Insert(std::string_view text, int32_t id) {
  int node = 0;
  for (char ch : text) {
    const auto byte = static_cast<uint8_t>(ch);
    int next = Child(node, byte);
    if (next < 0) {
      next = static_cast<int>(nodes_.size());
      nodes_.emplace_back();
      auto& children = nodes_[node].children;
      auto it = std::lower_bound(
          children.begin(), children.end(), byte,
          [](const std::pair<uint8_t, int>& c, uint8_t b) { return c.first < b; });
      children.insert(it, {byte, next});
    }
    node = next;
  }
  nodes_[node].id = id;
}

}  // namespace tokenizer_internal

Expected<TokenizerSpec::Model> TokenizerSpec::ModelFromGgufName(std::string_view name) {
  if (name == "gpt2") return Model::kBytePairGpt2;
  if (name == "llama") return Model::kSentencePieceBpe;
  return Unimplemented("tokenizer.ggml.model \"" + std::string(name) +
                       "\" is not supported (ember has \"gpt2\" and \"llama\")");
}

Tokenizer::Tokenizer(TokenizerSpec spec, std::unique_ptr<TokenizerState> state)
    : spec_(std::move(spec)), state_(std::move(state)) {}

Tokenizer::~Tokenizer() = default;

Expected<std::unique_ptr<Tokenizer>> Tokenizer::Create(TokenizerSpec spec) {
  const size_t n = spec.tokens.size();
  if (n == 0) return InvalidArgument("tokenizer spec has no tokens");
  if (n > static_cast<size_t>(INT32_MAX)) return InvalidArgument("tokenizer vocabulary too large");
  if (!spec.scores.empty() && spec.scores.size() != n) {
    return InvalidArgument("tokenizer spec has " + std::to_string(spec.scores.size()) +
                           " scores for " + std::to_string(n) + " tokens");
  }
  if (!spec.token_types.empty() && spec.token_types.size() != n) {
    return InvalidArgument("tokenizer spec has " + std::to_string(spec.token_types.size()) +
                           " token types for " + std::to_string(n) + " tokens");
  }
  EMBER_RETURN_IF_ERROR(CheckId("bos", spec.bos_id, n));
  EMBER_RETURN_IF_ERROR(CheckId("eos", spec.eos_id, n));
  EMBER_RETURN_IF_ERROR(CheckId("unk", spec.unk_id, n));
  EMBER_RETURN_IF_ERROR(CheckId("pad", spec.pad_id, n));
  if (spec.add_bos && spec.bos_id < 0) return InvalidArgument("add_bos is set but there is no bos id");
  if (spec.add_eos && spec.eos_id < 0) return InvalidArgument("add_eos is set but there is no eos id");

  auto state = std::make_unique<TokenizerState>();
  Vocab& v = state->vocab;
  v.text.resize(n);
  v.score.assign(n, 0.0f);
  v.attr.assign(n, ti::kAttrNormal);
  for (size_t i = 0; i < n; ++i) {
    v.text[i] = spec.tokens[i].empty() ? "[EMPTY_" + std::to_string(i) + "]" : spec.tokens[i];
    if (!spec.scores.empty()) v.score[i] = spec.scores[i];
    if (!spec.token_types.empty()) v.attr[i] = AttrOfType(spec.token_types[i]);
  }
  v.index.Build(v.text);
  const bool hf = spec.flavor == TokenizerSpec::Flavor::kHuggingFace;
  if (!hf) ApplyLlamaCppAttrFixups(&v);

  if (spec.model == TokenizerSpec::Model::kBytePairGpt2) {
    state->pre = ti::LookUpPreTokenizer(spec.pre_tokenizer);
    if (!state->pre) {
      return Unimplemented("byte-level BPE pre-tokenizer \"" + spec.pre_tokenizer +
                           "\" is not supported (ember has smollm, starcoder, gpt-2, llama3, "
                           "llama-bpe, qwen2, stablelm2 and their llama.cpp aliases)");
    }
    spec.ignore_merges = spec.ignore_merges || state->pre->ignore_merges;
    EMBER_ASSIGN_OR_RETURN(BpeModel bpe, BpeModel::Create(&v, spec.merges, spec.ignore_merges));
    state->bpe.emplace(std::move(bpe));
  } else {
    state->spm.emplace(&v);
    if (hf) {
      // tokenizers' BPE model: ranked merges over characters, <0xNN> byte fallback.
      EMBER_ASSIGN_OR_RETURN(BpeModel bpe, BpeModel::Create(&v, spec.merges, spec.ignore_merges,
                                                            BpeModel::Symbols::kCharacters, spec.unk_id));
      state->bpe.emplace(std::move(bpe));
    }
  }

  // Longest first, so that a special token containing another wins; then by id, so the order
  // is deterministic (llama.cpp leaves ties to std::sort).
  // SentencePiece matches its user-defined pieces in the normalized text, where every space is
  // already U+2581, so a literal U+2581 in the input is a space as far as matching goes. Ember
  // matches in text escaped the same way, so special texts are escaped too (llama.cpp's converter
  // stored Gemma 3's "▁▁" pieces as "  "; they match typed spaces and typed U+2581 alike).
  const bool spm = spec.model == TokenizerSpec::Model::kSentencePieceBpe;
  state->special_text.resize(n);
  for (int32_t id = 0; id < static_cast<int32_t>(n); ++id) {
    if (v.attr[id] & (ti::kAttrControl | ti::kAttrUserDefined | ti::kAttrUnknown)) {
      state->special_by_length.push_back(id);
      state->special_text[id] = spm && !hf ? EscapeSpaces(v.text[id]) : v.text[id];
      state->special_trie.Insert(state->special_text[id], id);
    }
  }
  std::stable_sort(state->special_by_length.begin(), state->special_by_length.end(),
                   [&](int32_t a, int32_t b) { return v.text[a].size() > v.text[b].size(); });
  state->special_rank.assign(n, -1);
  for (size_t r = 0; r < state->special_by_length.size(); ++r) {
    state->special_rank[state->special_by_length[r]] = static_cast<int32_t>(r);
  }

  state->piece.resize(n);
  for (size_t i = 0; i < n; ++i) state->piece[i] = PieceOf(spec, v, static_cast<int32_t>(i));
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(spec), std::move(state)));
}

namespace {

// Hugging Face's AddedVocabulary: one pass, leftmost-longest over every added token; a special
// token's match that is not parsed is skipped and its text stays in the surrounding raw text.
std::vector<Fragment> HfFragments(const TokenizerState& state, std::string_view text, bool parse_special) {
  const Vocab& v = state.vocab;
  std::vector<Fragment> fragments;
  size_t raw_start = 0;
  for (size_t i = 0; i < text.size();) {
    const auto [id, len] = state.special_trie.LongestAt(text, i);
    if (id < 0) {
      ++i;
      continue;
    }
    const bool needs_parse = v.attr[id] & (ti::kAttrControl | ti::kAttrUnknown);
    if (!needs_parse || parse_special) {
      if (i > raw_start) fragments.push_back({-1, raw_start, i - raw_start});
      fragments.push_back({id, 0, 0});
      raw_start = i + len;
    }
    i += len;
  }
  if (raw_start < text.size()) fragments.push_back({-1, raw_start, text.size() - raw_start});
  return fragments;
}

// llama.cpp's: one special token at a time, longest first, every occurrence in what is still raw
// text. Only tokens that occur anywhere in the input can match, so the trie narrows the list
// first; the result is the same as trying them all.
void LlamaCppFragments(const TokenizerState& state, std::string_view text, bool parse_special,
                       std::vector<Fragment>* out) {
  const Vocab& v = state.vocab;
  std::vector<Fragment>& fragments = *out;
  if (!text.empty()) fragments.push_back({-1, 0, text.size()});
  std::vector<int32_t> candidates;
  state.special_trie.ForEachOccurring(text, [&](int32_t id) {
    const bool needs_parse = v.attr[id] & (ti::kAttrControl | ti::kAttrUnknown);
    if (!needs_parse || parse_special) candidates.push_back(state.special_rank[id]);
  });
  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
  for (int32_t rank : candidates) {
    const int32_t id = state.special_by_length[rank];
    const std::string& needle = state.special_text[id];
    std::vector<Fragment> next;
    next.reserve(fragments.size() + 2);
    for (const Fragment& f : fragments) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      const std::string_view raw = text.substr(f.offset, f.length);
      size_t from = 0;
      for (size_t at = raw.find(needle); at != std::string_view::npos; at = raw.find(needle, from)) {
        if (at > from) next.push_back({-1, f.offset + from, at - from});
        next.push_back({id, 0, 0});
        from = at + needle.size();
      }
      if (from < raw.size()) next.push_back({-1, f.offset + from, raw.size() - from});
    }
    fragments = std::move(next);
  }
}

}  // namespace

std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
  // SentencePiece (llama.cpp flavour): spaces become U+2581 before anything is matched, so that
  // a U+2581 typed in the input and a space are the same character from here on, as in
  // SentencePiece. Hugging Face matches added tokens in the raw text and normalizes after.
  const bool hf = spec_.flavor == TokenizerSpec::Flavor::kHuggingFace;
  std::string escaped_input;
  if (state_->spm && !hf) {
    escaped_input = EscapeSpaces(text);
    text = escaped_input;
  }
  // 1. Cut out special tokens, llama.cpp's or Hugging Face's way.
  std::vector<Fragment> fragments;
  if (hf) {
    fragments = HfFragments(*state_, text, parse_special);
  } else {
    LlamaCppFragments(*state_, text, parse_special, &fragments);
  }

  // 2. Run the model on each raw fragment.
  std::vector<int32_t> out;
  if (add_special && spec_.add_bos) out.push_back(spec_.bos_id);
  if (state_->spm) {
    bool after_special = true;  // the start counts, for the space prefix
    std::string escaped;
    for (const Fragment& f : fragments) {
      if (f.token >= 0) {
        out.push_back(f.token);
        after_special = true;
        continue;
      }
      escaped.clear();
      if (spec_.add_space_prefix && after_special) escaped.append(kSpaceMark);
      if (hf) {
        escaped.append(EscapeSpaces(text.substr(f.offset, f.length)));
        state_->bpe->EncodeWord(escaped, &out);
      } else {
        escaped.append(text.substr(f.offset, f.length));  // spaces are U+2581 already
        state_->spm->Encode(escaped, &out);
      }
      after_special = false;
    }
  } else {
    std::string utf8;
    for (const Fragment& f : fragments) {
      if (f.token >= 0) {
        out.push_back(f.token);
        continue;
      }
      const std::vector<uint32_t> cps = unicode::DecodeUtf8(text.substr(f.offset, f.length));
      size_t pos = 0;
      for (size_t len : ti::SplitWords(state_->pre->kind, cps)) {
        utf8.clear();
        for (size_t k = pos; k < pos + len; ++k) unicode::AppendUtf8(cps[k], &utf8);
        pos += len;
        state_->bpe->EncodeWord(utf8, &out);
      }
    }
  }
  if (add_special && spec_.add_eos) out.push_back(spec_.eos_id);
  return out;
}

void Tokenizer::AppendPiece(int32_t id, bool skip_special, bool* strip_space,
                            std::string* out) const {
  if (id < 0 || id >= vocab_size()) return;
  const uint8_t attr = state_->vocab.attr[id];
  if (attr & (ti::kAttrControl | ti::kAttrUnknown | ti::kAttrUserDefined)) {
    // Encode prefixed the text after every special fragment with a space.
    *strip_space = true;
    if (skip_special && (attr & (ti::kAttrControl | ti::kAttrUnknown))) return;
    out->append(state_->piece[id]);
    return;
  }
  const std::string& piece = state_->piece[id];
  if (piece.empty()) return;
  const bool strip = *strip_space && spec_.add_space_prefix && piece[0] == ' ';
  *strip_space = false;
  out->append(piece, strip ? 1 : 0, std::string::npos);
}

std::string Tokenizer::Decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string out;
  bool strip_space = true;
  for (int32_t id : ids) AppendPiece(id, skip_special, &strip_space, &out);
  return out;
}

std::string Tokenizer::TokenText(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return "";
  return state_->vocab.text[id];
}

std::string Tokenizer::TokenPiece(int32_t id, bool skip_special) const {
  if (id < 0 || id >= vocab_size()) return "";
  if (skip_special && IsSpecial(id)) return "";
  return state_->piece[id];
}

std::optional<int32_t> Tokenizer::TokenId(std::string_view text) const {
  const int32_t id = state_->vocab.Find(text);
  if (id < 0) return std::nullopt;
  return id;
}

bool Tokenizer::IsSpecial(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return false;
  return state_->vocab.attr[id] & (ti::kAttrControl | ti::kAttrUnknown);
}

int32_t Tokenizer::vocab_size() const { return state_->vocab.size(); }

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer* tokenizer, bool skip_special)
    : tokenizer_(tokenizer), skip_special_(skip_special) {}

std::string IncrementalDetokenizer::Add(int32_t id) {
  tokenizer_->AppendPiece(id, skip_special_, &strip_space_, &pending_);
  const size_t complete = unicode::CompleteUtf8Prefix(pending_);
  std::string out = pending_.substr(0, complete);
  pending_.erase(0, complete);
  return out;
}

std::string IncrementalDetokenizer::Flush() {
  std::string out = std::move(pending_);
  pending_.clear();
  strip_space_ = true;
  return out;
}

}  // namespace ember
