#include "tokenizer/pretokenize.h"

#include <algorithm>
#include <array>

#include "tokenizer/unicode.h"

namespace ember::tokenizer_internal {
namespace {

using unicode::FlagsOf;

// A window of code points [begin, end) that one regex scans; a match never crosses its ends
// (earlier splits, e.g. isolated digits, are final).
struct Window {
  const std::vector<uint32_t>& cps;
  size_t begin;
  size_t end;

  bool Has(size_t i) const { return i >= begin && i < end; }
  uint32_t At(size_t i) const { return cps[i]; }
  bool Letter(size_t i) const { return Has(i) && (FlagsOf(cps[i]) & unicode::kLetter); }
  bool Number(size_t i) const { return Has(i) && (FlagsOf(cps[i]) & unicode::kNumber); }
  bool Space(size_t i) const { return Has(i) && (FlagsOf(cps[i]) & unicode::kWhitespace); }
  // [^\s\p{L}\p{N}]: any character that is none of the three (unassigned ones included).
  bool Other(size_t i) const {
    return Has(i) && !(FlagsOf(cps[i]) & (unicode::kLetter | unicode::kNumber | unicode::kWhitespace));
  }
  bool LineBreak(size_t i) const { return Has(i) && (cps[i] == '\r' || cps[i] == '\n'); }
};

uint32_t AsciiLower(uint32_t c) { return (c >= 'A' && c <= 'Z') ? c + ('a' - 'A') : c; }

// Length of the contraction 's|'t|'re|'ve|'m|'ll|'d at `pos`, or 0. Only ASCII letters can
// lower-case to these, so ASCII folding is exact for the (?i:...) form too.
size_t Contraction(const Window& w, size_t pos, bool ignore_case) {
  if (!w.Has(pos + 1) || w.At(pos) != '\'') return 0;
  auto fold = [&](size_t i) { return ignore_case ? AsciiLower(w.At(i)) : w.At(i); };
  const uint32_t c1 = fold(pos + 1);
  if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
  if (!w.Has(pos + 2)) return 0;
  const uint32_t c2 = fold(pos + 2);
  if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return 3;
  return 0;
}

// \s+(?!\S)|\s+ at `pos` (which is whitespace): a run of whitespace followed by a non-space
// gives its last character back, so that " word" keeps its space; at the end of the window the
// whole run matches.
size_t TrailingWhitespace(const Window& w, size_t pos) {
  size_t n = 0;
  while (w.Space(pos + n)) ++n;
  if (n > 1 && w.Has(pos + n)) return n - 1;
  return n;
}

template <typename Pred>
size_t RunLength(const Window& w, size_t pos, Pred pred) {
  size_t n = 0;
  while (pred(pos + n)) ++n;
  return n;
}

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
void SplitGpt2(const Window& w, std::vector<size_t>* out) {
  size_t pos = w.begin;
  while (pos < w.end) {
    size_t len = Contraction(w, pos, /*ignore_case=*/false);
    if (len == 0) {
      // The optional leading space belongs to the run that follows it.
      const size_t start = (w.At(pos) == ' ' && w.Has(pos + 1)) ? pos + 1 : pos;
      const size_t skip = start - pos;
      if (w.Letter(start)) {
        len = skip + RunLength(w, start, [&](size_t i) { return w.Letter(i); });
      } else if (w.Number(start)) {
        len = skip + RunLength(w, start, [&](size_t i) { return w.Number(i); });
      } else if (w.Other(start)) {
        len = skip + RunLength(w, start, [&](size_t i) { return w.Other(i); });
      } else if (w.Space(pos)) {
        len = TrailingWhitespace(w, pos);
      } else {
        len = 1;  // unreachable: every character is a letter, number, space or other
      }
    }
    out->push_back(len);
    pos += len;
  }
}

// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,D}| ?[^\s\p{L}\p{N}]+[\r\n]*|
// \s*[\r\n]+|\s+(?!\S)|\s+        with D = max_digits (3 for llama3, 1 for qwen2).
void SplitLlama3(const Window& w, size_t max_digits, std::vector<size_t>* out) {
  size_t pos = w.begin;
  while (pos < w.end) {
    size_t len = Contraction(w, pos, /*ignore_case=*/true);
    if (len > 0) {
      out->push_back(len);
      pos += len;
      continue;
    }
    // [^\r\n\p{L}\p{N}]?\p{L}+ : one optional non-letter, non-digit, non-line-break prefix.
    if (w.Letter(pos)) {
      len = RunLength(w, pos, [&](size_t i) { return w.Letter(i); });
    } else if (!w.LineBreak(pos) && !w.Number(pos) && w.Letter(pos + 1)) {
      len = 1 + RunLength(w, pos + 1, [&](size_t i) { return w.Letter(i); });
    } else if (w.Number(pos)) {
      len = std::min(max_digits, RunLength(w, pos, [&](size_t i) { return w.Number(i); }));
    } else {
      const size_t start = (w.At(pos) == ' ' && w.Other(pos + 1)) ? pos + 1 : pos;
      if (w.Other(start)) {
        size_t end = start + RunLength(w, start, [&](size_t i) { return w.Other(i); });
        end += RunLength(w, end, [&](size_t i) { return w.LineBreak(i); });
        len = end - pos;
      } else {
        // Whitespace. \s*[\r\n]+ ends after the run's last line break, if it has one.
        size_t run = 0;
        size_t through_last_break = 0;
        while (w.Space(pos + run)) {
          if (w.LineBreak(pos + run)) through_last_break = run + 1;
          ++run;
        }
        if (through_last_break > 0) {
          len = through_last_break;
        } else if (run > 0) {
          len = TrailingWhitespace(w, pos);
        } else {
          len = 1;  // unreachable, as in SplitGpt2
        }
      }
    }
    out->push_back(len);
    pos += len;
  }
}

// \p{N} with "isolated" behaviour: every numeric character alone, the text between kept whole.
void IsolateDigits(const Window& w, std::vector<size_t>* out) {
  size_t pos = w.begin;
  while (pos < w.end) {
    size_t len = w.Number(pos) ? 1 : RunLength(w, pos, [&](size_t i) {
      return w.Has(i) && !w.Number(i);
    });
    out->push_back(len);
    pos += len;
  }
}

struct NamedPreTokenizer {
  std::string_view name;
  PreTokenizerInfo info;
};

constexpr std::array<NamedPreTokenizer, 20> kByName = {{
    {"gpt2", {PreTokenizer::kGpt2, false}},
    {"gpt-2", {PreTokenizer::kGpt2, false}},
    {"mpt", {PreTokenizer::kGpt2, false}},
    {"olmo", {PreTokenizer::kGpt2, false}},
    {"phi-2", {PreTokenizer::kGpt2, false}},
    {"jais", {PreTokenizer::kGpt2, false}},
    {"smollm", {PreTokenizer::kDigitsThenGpt2, false}},
    {"starcoder", {PreTokenizer::kDigitsThenGpt2, false}},
    {"refact", {PreTokenizer::kDigitsThenGpt2, false}},
    {"command-r", {PreTokenizer::kDigitsThenGpt2, false}},
    {"codeshell", {PreTokenizer::kDigitsThenGpt2, false}},
    {"exaone", {PreTokenizer::kDigitsThenGpt2, false}},
    {"minerva", {PreTokenizer::kDigitsThenGpt2, false}},
    {"llama3", {PreTokenizer::kLlama3, true}},
    {"llama-v3", {PreTokenizer::kLlama3, true}},
    {"llama-bpe", {PreTokenizer::kLlama3, true}},
    {"falcon3", {PreTokenizer::kLlama3, true}},
    {"pixtral", {PreTokenizer::kLlama3, true}},
    {"qwen2", {PreTokenizer::kQwen2, false}},
    {"stablelm2", {PreTokenizer::kQwen2, false}},
}};

}  // namespace

std::optional<PreTokenizerInfo> LookUpPreTokenizer(std::string_view name) {
  for (const auto& entry : kByName) {
    if (entry.name == name) return entry.info;
  }
  if (name == "dbrx" || name == "smaug-bpe") return PreTokenizerInfo{PreTokenizer::kLlama3, false};
  if (name == "deepseek-r1-qwen") return PreTokenizerInfo{PreTokenizer::kQwen2, false};
  return std::nullopt;
}

std::vector<size_t> SplitWords(PreTokenizer kind, const std::vector<uint32_t>& cps) {
  std::vector<size_t> words;
  words.reserve(cps.size() / 3 + 1);
  const Window all{cps, 0, cps.size()};
  switch (kind) {
    case PreTokenizer::kGpt2:
      SplitGpt2(all, &words);
      break;
    case PreTokenizer::kLlama3:
      SplitLlama3(all, 3, &words);
      break;
    case PreTokenizer::kQwen2:
      SplitLlama3(all, 1, &words);
      break;
    case PreTokenizer::kDigitsThenGpt2: {
      std::vector<size_t> pieces;
      IsolateDigits(all, &pieces);
      size_t begin = 0;
      for (size_t len : pieces) {
        SplitGpt2(Window{cps, begin, begin + len}, &words);
        begin += len;
      }
      break;
    }
  }
  return words;
}

}  // namespace ember::tokenizer_internal
