// Python's Unicode case mapping (str.upper/lower/title/capitalize/swapcase) for the scripts chat
// templates meet in practice: Latin, Greek, Cyrillic, Armenian and fullwidth Latin, including the
// one-to-many mappings Python applies there.
#include "tokenizer/jinja/pystr.h"

namespace ember::jinja::py {
namespace {

// One-to-many case mappings as UTF-32; empty when the mapping is one-to-one.
struct Mapping {
  char32_t single;
  std::u32string_view multi;
};

// Pairs where the upper-case letter sits at even code points and its lower-case at the next one.
bool InEvenUpperPairs(char32_t c) {
  return (c >= 0x0100 && c <= 0x012F) || (c >= 0x0132 && c <= 0x0137) ||
         (c >= 0x01DE && c <= 0x01EF) || (c >= 0x01F4 && c <= 0x01F5) ||
         (c >= 0x01F8 && c <= 0x021F) || (c >= 0x0222 && c <= 0x0233) ||
         (c >= 0x0246 && c <= 0x024F) ||
         (c >= 0x014A && c <= 0x0177) || (c >= 0x0460 && c <= 0x0481) ||
         (c >= 0x048A && c <= 0x04BF) || (c >= 0x04D0 && c <= 0x052F) ||
         (c >= 0x1E00 && c <= 0x1E95) || (c >= 0x1EA0 && c <= 0x1EFF);
}
// Pairs where the upper-case letter sits at odd code points.
bool InOddUpperPairs(char32_t c) {
  return (c >= 0x0139 && c <= 0x0148) || (c >= 0x0179 && c <= 0x017E) ||
         (c >= 0x01CD && c <= 0x01DC) ||
         (c >= 0x04C1 && c <= 0x04CE);
}

// The Latin digraphs DŽ/Dž/dž, LJ/Lj/lj, NJ/Nj/nj and DZ/Dz/dz come in upper, title and lower forms;
// `form` is 0 for upper, 1 for title, 2 for lower. Returns 0 if `c` is not one of them.
char32_t DigraphForm(char32_t c, int form) {
  if (c >= 0x01C4 && c <= 0x01CC) return 0x01C4 + (c - 0x01C4) / 3 * 3 + form;
  if (c >= 0x01F1 && c <= 0x01F3) return 0x01F1 + form;
  return 0;
}

Mapping UpperOf(char32_t c) {
  if (c < 0x80) return {(c >= 'a' && c <= 'z') ? c - 32 : c, {}};
  if (const char32_t d = DigraphForm(c, 0)) return {d, {}};
  switch (c) {
    case 0x00B5: return {0x039C, {}};
    case 0x00DF: return {0, U"SS"};
    case 0x00FF: return {0x0178, {}};
    case 0x0131: return {'I', {}};
    case 0x0149: return {0, U"\u02BCN"};
    case 0x017F: return {'S', {}};
    case 0x03C2: return {0x03A3, {}};
    case 0x0390: return {0, U"\u0399\u0308\u0301"};
    case 0x03B0: return {0, U"\u03A5\u0308\u0301"};
    case 0x03AC: return {0x0386, {}};
    case 0x03CC: return {0x038C, {}};
    case 0x04CF: return {0x04C0, {}};
    case 0x0587: return {0, U"\u0535\u0552"};
    default: break;
  }
  if (c >= 0xE0 && c <= 0xFE && c != 0xF7) return {c - 0x20, {}};
  if (InEvenUpperPairs(c)) return {(c % 2 == 1) ? c - 1 : c, {}};
  if (InOddUpperPairs(c)) return {(c % 2 == 0) ? c - 1 : c, {}};
  if ((c >= 0x03B1 && c <= 0x03C1) || (c >= 0x03C3 && c <= 0x03CB)) return {c - 0x20, {}};
  if (c >= 0x03AD && c <= 0x03AF) return {c - 0x25, {}};
  if (c >= 0x03CD && c <= 0x03CE) return {c - 0x3F, {}};
  if (c >= 0x0430 && c <= 0x044F) return {c - 0x20, {}};
  if (c >= 0x0450 && c <= 0x045F) return {c - 0x50, {}};
  if (c >= 0x0561 && c <= 0x0586) return {c - 0x30, {}};
  if (c >= 0xFF41 && c <= 0xFF5A) return {c - 0x20, {}};
  return {c, {}};
}

Mapping LowerOf(char32_t c) {
  if (c < 0x80) return {(c >= 'A' && c <= 'Z') ? c + 32 : c, {}};
  if (const char32_t d = DigraphForm(c, 2)) return {d, {}};
  switch (c) {
    case 0x0130: return {0, U"i\u0307"};
    case 0x0178: return {0x00FF, {}};
    case 0x0386: return {0x03AC, {}};
    case 0x038C: return {0x03CC, {}};
    case 0x04C0: return {0x04CF, {}};
    case 0x1E9E: return {0x00DF, {}};
    default: break;
  }
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return {c + 0x20, {}};
  if (InEvenUpperPairs(c)) return {(c % 2 == 0) ? c + 1 : c, {}};
  if (InOddUpperPairs(c)) return {(c % 2 == 1) ? c + 1 : c, {}};
  if ((c >= 0x0391 && c <= 0x03A1) || (c >= 0x03A3 && c <= 0x03AB)) return {c + 0x20, {}};
  if (c >= 0x0388 && c <= 0x038A) return {c + 0x25, {}};
  if (c >= 0x038E && c <= 0x038F) return {c + 0x3F, {}};
  if (c >= 0x0410 && c <= 0x042F) return {c + 0x20, {}};
  if (c >= 0x0400 && c <= 0x040F) return {c + 0x50, {}};
  if (c >= 0x0531 && c <= 0x0556) return {c + 0x30, {}};
  if (c >= 0xFF21 && c <= 0xFF3A) return {c + 0x20, {}};
  return {c, {}};
}

// Title case differs from upper case only for the one-to-many mappings we cover.
Mapping TitleOf(char32_t c) {
  if (const char32_t d = DigraphForm(c, 1)) return {d, {}};
  if (c == 0x00DF) return {0, U"Ss"};
  if (c == 0x0587) return {0, U"\u0535\u0582"};
  return UpperOf(c);
}

void AppendMapping(std::u32string& out, const Mapping& m) {
  if (m.multi.empty()) {
    out.push_back(m.single);
  } else {
    out.append(m.multi);
  }
}

}  // namespace

bool IsCased(char32_t c) {
  if (c == 0x00DF || c == 0x0138 || c == 0x0149 || c == 0x0390 || c == 0x03B0) return true;
  const Mapping up = UpperOf(c);
  const Mapping low = LowerOf(c);
  return !up.multi.empty() || !low.multi.empty() || up.single != c || low.single != c;
}

namespace {

// Title-case letters (the digraphs' middle forms) are neither upper nor lower case.
bool IsTitleChar(char32_t c) { return DigraphForm(c, 1) == c; }

}  // namespace

bool IsUpperChar(char32_t c) {
  if (IsTitleChar(c)) return false;
  const Mapping low = LowerOf(c);
  return !low.multi.empty() || low.single != c;
}

bool IsLowerChar(char32_t c) { return IsCased(c) && !IsUpperChar(c) && !IsTitleChar(c); }

std::string Upper(std::string_view s) {
  std::u32string out;
  for (char32_t c : Decode(s)) AppendMapping(out, UpperOf(c));
  return Encode(out);
}

std::string Lower(std::string_view s) {
  const std::u32string cps = Decode(s);
  std::u32string out;
  for (size_t i = 0; i < cps.size(); ++i) {
    if (cps[i] == 0x03A3) {
      // Python lowers a capital sigma that ends a word to the final form.
      const bool after_cased = i > 0 && IsCased(cps[i - 1]);
      const bool before_cased = i + 1 < cps.size() && IsCased(cps[i + 1]);
      out.push_back(after_cased && !before_cased ? 0x03C2 : 0x03C3);
      continue;
    }
    AppendMapping(out, LowerOf(cps[i]));
  }
  return Encode(out);
}

std::string SwapCase(std::string_view s) {
  std::u32string out;
  for (char32_t c : Decode(s)) {
    if (IsUpperChar(c)) {
      AppendMapping(out, LowerOf(c));
    } else if (IsLowerChar(c)) {
      AppendMapping(out, UpperOf(c));
    } else {
      out.push_back(c);
    }
  }
  return Encode(out);
}

std::string Title(std::string_view s) {
  std::u32string out;
  bool previous_cased = false;
  for (char32_t c : Decode(s)) {
    AppendMapping(out, previous_cased ? LowerOf(c) : TitleOf(c));
    previous_cased = IsCased(c);
  }
  return Encode(out);
}

std::string Capitalize(std::string_view s) {
  const std::u32string cps = Decode(s);
  std::u32string out;
  for (size_t i = 0; i < cps.size(); ++i) {
    AppendMapping(out, i == 0 ? TitleOf(cps[i]) : LowerOf(cps[i]));
  }
  return Encode(out);
}

bool IsLower(std::string_view s) {
  bool any_cased = false;
  for (char32_t c : Decode(s)) {
    if (IsUpperChar(c)) return false;
    any_cased = any_cased || IsLowerChar(c);
  }
  return any_cased;
}

bool IsUpper(std::string_view s) {
  bool any_cased = false;
  for (char32_t c : Decode(s)) {
    if (IsLowerChar(c)) return false;
    any_cased = any_cased || IsUpperChar(c);
  }
  return any_cased;
}

}  // namespace ember::jinja::py
