#include "tokenizer/jinja/pystr.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace ember::jinja::py {
namespace {

constexpr char32_t kEscapeBase = 0xDC80;  // surrogateescape: invalid byte b -> U+DC80 + (b - 0x80)

bool IsLineBreak(char32_t c) {
  return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D ||
         c == 0x1E || c == 0x85 || c == 0x2028 || c == 0x2029;
}

// The code-point index at which byte `byte_offset` starts.
size_t ByteOffsetToIndex(std::string_view s, size_t byte_offset) {
  return static_cast<size_t>(Length(s.substr(0, byte_offset)));
}

bool InChars(char32_t c, const std::u32string& set) { return set.find(c) != std::u32string::npos; }

}  // namespace

void AppendUtf8(std::string& out, char32_t c) {
  if (c >= kEscapeBase && c <= kEscapeBase + 0x7F) {  // an escaped invalid byte: restore it
    out.push_back(static_cast<char>(c - kEscapeBase + 0x80));
  } else if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

std::u32string Decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    if (b0 < 0x80) {
      out.push_back(b0);
      ++i;
      continue;
    }
    int extra = 0;
    char32_t cp = 0;
    char32_t min = 0;
    if ((b0 & 0xE0) == 0xC0) {
      extra = 1, cp = b0 & 0x1F, min = 0x80;
    } else if ((b0 & 0xF0) == 0xE0) {
      extra = 2, cp = b0 & 0x0F, min = 0x800;
    } else if ((b0 & 0xF8) == 0xF0) {
      extra = 3, cp = b0 & 0x07, min = 0x10000;
    }
    bool valid = extra > 0;
    if (valid) {
      for (int k = 1; k <= extra; ++k) {
        if (i + k >= s.size()) {
          valid = false;
          break;
        }
        const auto b = static_cast<unsigned char>(s[i + k]);
        if ((b & 0xC0) != 0x80) {
          valid = false;
          break;
        }
        cp = (cp << 6) | (b & 0x3F);
      }
    }
    if (valid && cp >= min && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF)) {
      out.push_back(cp);
      i += extra + 1;
    } else {
      out.push_back(kEscapeBase + (b0 - 0x80));
      ++i;
    }
  }
  return out;
}

std::string Encode(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) AppendUtf8(out, c);
  return out;
}

int64_t Length(std::string_view s) {
  for (unsigned char b : s) {
    if (b >= 0x80) return static_cast<int64_t>(Decode(s).size());
  }
  return static_cast<int64_t>(s.size());
}

bool IsSpace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

bool IsPrintable(char32_t c) {
  if (c < 0x20 || c == 0x7F) return false;
  if (c < 0x7F) return true;
  if (c <= 0xA0 || c == 0xAD) return false;
  if (c == 0x1680 || (c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F) ||
      (c >= 0x205F && c <= 0x2064) || (c >= 0x2066 && c <= 0x206F) || c == 0x3000 ||
      c == 0x061C || c == 0x180E || c == 0xFEFF || (c >= 0xFFF9 && c <= 0xFFFB)) {
    return false;
  }
  if ((c >= 0xD800 && c <= 0xDFFF) || (c >= 0xE000 && c <= 0xF8FF) || c == 0xFFFE ||
      c == 0xFFFF || c >= 0xF0000 || (c >= 0xE0000 && c <= 0xE007F)) {
    return false;
  }
  return true;
}

bool IsWordChar(char32_t c) {
  if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  if (c < 0xC0) {
    // Latin-1 punctuation and symbols, except the letters and numbers among them.
    return c == 0xAA || c == 0xB2 || c == 0xB3 || c == 0xB5 || c == 0xB9 || c == 0xBA || (c >= 0xBC && c <= 0xBE);
  }
  if (c == 0xD7 || c == 0xF7) return false;
  if (IsSpace(c) || !IsPrintable(c)) return false;
  const bool symbol_block =
      (c >= 0x0300 && c <= 0x036F) ||                            // combining diacritics
      (c >= 0x2000 && c <= 0x206F) || (c >= 0x20A0 && c <= 0x20FF) ||  // punctuation, currency
      (c >= 0x2190 && c <= 0x2BFF) || (c >= 0x2E00 && c <= 0x2E7F) ||  // arrows, math, shapes
      (c >= 0x3000 && c <= 0x3004) || (c >= 0x3008 && c <= 0x3020) ||  // CJK punctuation
      (c >= 0xFE00 && c <= 0xFE0F) || (c >= 0xFE30 && c <= 0xFE4F) ||  // variation selectors
      (c >= 0xFF01 && c <= 0xFF0F) || (c >= 0xFF1A && c <= 0xFF20) || (c >= 0xFF3B && c <= 0xFF40) ||
      (c >= 0xFF5B && c <= 0xFF65) || (c >= 0x1F000 && c <= 0x1FAFF);  // emoji and pictographs
  return !symbol_block;
}

std::string Strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                  bool right) {
  const std::u32string cps = Decode(s);
  const std::u32string set = chars ? Decode(*chars) : std::u32string();
  auto strip_it = [&](char32_t c) { return chars ? InChars(c, set) : IsSpace(c); };
  size_t begin = 0;
  size_t end = cps.size();
  if (left) {
    while (begin < end && strip_it(cps[begin])) ++begin;
  }
  if (right) {
    while (end > begin && strip_it(cps[end - 1])) --end;
  }
  return Encode(std::u32string_view(cps).substr(begin, end - begin));
}

std::vector<std::string> Split(std::string_view s, const std::optional<std::string>& sep,
                               int64_t maxsplit) {
  std::vector<std::string> parts;
  if (sep) {
    size_t start = 0;
    while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
      const size_t at = s.find(*sep, start);
      if (at == std::string_view::npos) break;
      parts.emplace_back(s.substr(start, at - start));
      start = at + sep->size();
    }
    parts.emplace_back(s.substr(start));
    return parts;
  }
  const std::u32string cps = Decode(s);
  size_t i = 0;
  while (true) {
    while (i < cps.size() && IsSpace(cps[i])) ++i;
    if (i == cps.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
      // The remainder keeps its trailing whitespace, as in Python.
      parts.push_back(Encode(std::u32string_view(cps).substr(i)));
      break;
    }
    size_t j = i;
    while (j < cps.size() && !IsSpace(cps[j])) ++j;
    parts.push_back(Encode(std::u32string_view(cps).substr(i, j - i)));
    i = j;
  }
  return parts;
}

std::vector<std::string> RSplit(std::string_view s, const std::optional<std::string>& sep,
                                int64_t maxsplit) {
  std::vector<std::string> parts;
  if (sep) {
    size_t end = s.size();
    while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
      if (end < sep->size()) break;
      const size_t at = s.rfind(*sep, end - sep->size());
      if (at == std::string_view::npos) break;
      parts.emplace_back(s.substr(at + sep->size(), end - at - sep->size()));
      end = at;
    }
    parts.emplace_back(s.substr(0, end));
  } else {
    const std::u32string cps = Decode(s);
    size_t i = cps.size();
    while (true) {
      while (i > 0 && IsSpace(cps[i - 1])) --i;
      if (i == 0) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        parts.push_back(Encode(std::u32string_view(cps).substr(0, i)));
        break;
      }
      size_t j = i;
      while (j > 0 && !IsSpace(cps[j - 1])) --j;
      parts.push_back(Encode(std::u32string_view(cps).substr(j, i - j)));
      i = j;
    }
  }
  return std::vector<std::string>(parts.rbegin(), parts.rend());
}

std::vector<std::string> SplitLines(std::string_view s, bool keepends) {
  const std::u32string cps = Decode(s);
  std::vector<std::string> lines;
  size_t start = 0;
  size_t i = 0;
  while (i < cps.size()) {
    if (!IsLineBreak(cps[i])) {
      ++i;
      continue;
    }
    size_t eol = i + 1;
    if (cps[i] == '\r' && eol < cps.size() && cps[eol] == '\n') ++eol;
    const size_t end = keepends ? eol : i;
    lines.push_back(Encode(std::u32string_view(cps).substr(start, end - start)));
    start = i = eol;
  }
  if (start < cps.size()) lines.push_back(Encode(std::u32string_view(cps).substr(start)));
  return lines;
}

std::string Replace(std::string_view s, std::string_view old, std::string_view replacement,
                    int64_t count) {
  std::string out;
  int64_t done = 0;
  if (old.empty()) {
    const std::u32string cps = Decode(s);
    for (size_t i = 0; i <= cps.size(); ++i) {
      if (count < 0 || done < count) {
        out.append(replacement);
        ++done;
      }
      if (i < cps.size()) AppendUtf8(out, cps[i]);
    }
    return out;
  }
  size_t start = 0;
  while (count < 0 || done < count) {
    const size_t at = s.find(old, start);
    if (at == std::string_view::npos) break;
    out.append(s.substr(start, at - start));
    out.append(replacement);
    start = at + old.size();
    ++done;
  }
  out.append(s.substr(start));
  return out;
}

int64_t Find(std::string_view s, std::string_view sub) {
  const size_t at = s.find(sub);
  return at == std::string_view::npos ? -1 : static_cast<int64_t>(ByteOffsetToIndex(s, at));
}

int64_t RFind(std::string_view s, std::string_view sub) {
  const size_t at = s.rfind(sub);
  return at == std::string_view::npos ? -1 : static_cast<int64_t>(ByteOffsetToIndex(s, at));
}

int64_t Count(std::string_view s, std::string_view sub) {
  if (sub.empty()) return Length(s) + 1;
  int64_t n = 0;
  for (size_t at = s.find(sub); at != std::string_view::npos; at = s.find(sub, at + sub.size())) {
    ++n;
  }
  return n;
}

std::string ReprString(std::string_view s) {
  const std::u32string cps = Decode(s);
  const bool has_single = cps.find(U'\'') != std::u32string::npos;
  const bool has_double = cps.find(U'"') != std::u32string::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  char buf[16];
  for (char32_t c : cps) {
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (IsPrintable(c)) {
      AppendUtf8(out, c);
    } else {
      if (c < 0x100) {
        std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned>(c));
      } else if (c < 0x10000) {
        std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
      } else {
        std::snprintf(buf, sizeof(buf), "\\U%08x", static_cast<unsigned>(c));
      }
      out += buf;
    }
  }
  out.push_back(quote);
  return out;
}

std::string ReprFloat(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  // Shortest round-trip digits in scientific form, then laid out the way Python's repr does:
  // positional for exponents in [-4, 16), scientific otherwise.
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  const size_t e_at = sci.find('e');
  const int exponent = std::atoi(sci.c_str() + e_at + 1);
  std::string digits;
  for (size_t i = 0; i < e_at; ++i) {
    if (sci[i] != '.') digits.push_back(sci[i]);
  }
  if (exponent >= -4 && exponent < 16) {
    std::string out;
    if (exponent < 0) {
      out = "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
    } else if (static_cast<size_t>(exponent) + 1 >= digits.size()) {
      out = digits + std::string(exponent + 1 - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, exponent + 1) + "." + digits.substr(exponent + 1);
    }
    return sign + out;
  }
  std::string mantissa = digits.substr(0, 1);
  if (digits.size() > 1) mantissa += "." + digits.substr(1);
  std::snprintf(buf, sizeof(buf), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return sign + mantissa + buf;
}

namespace {

// Removes Python's digit-group underscores; nullopt if one is not between two digits.
std::optional<std::string> StripUnderscores(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '_') {
      out.push_back(s[i]);
      continue;
    }
    const bool ok = i > 0 && i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i - 1])) &&
                    std::isdigit(static_cast<unsigned char>(s[i + 1]));
    if (!ok) return std::nullopt;
  }
  return out;
}

}  // namespace

std::optional<int64_t> ParseInt(std::string_view s) {
  const std::string trimmed = Strip(s, std::nullopt, true, true);
  auto cleaned = StripUnderscores(trimmed);
  if (!cleaned || cleaned->empty()) return std::nullopt;
  std::string_view body = *cleaned;
  bool negative = false;
  if (body[0] == '+' || body[0] == '-') {
    negative = body[0] == '-';
    body.remove_prefix(1);
  }
  if (body.empty()) return std::nullopt;
  uint64_t magnitude = 0;
  const auto res = std::from_chars(body.data(), body.data() + body.size(), magnitude);
  if (res.ec != std::errc() || res.ptr != body.data() + body.size()) return std::nullopt;
  if (magnitude > static_cast<uint64_t>(INT64_MAX) + (negative ? 1 : 0)) return std::nullopt;
  return negative ? static_cast<int64_t>(0 - magnitude) : static_cast<int64_t>(magnitude);
}

std::optional<double> ParseFloat(std::string_view s) {
  const std::string trimmed = Strip(s, std::nullopt, true, true);
  std::string lower = Lower(trimmed);
  std::string_view body = lower;
  bool negative = false;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) {
    negative = body[0] == '-';
    body.remove_prefix(1);
  }
  if (body == "inf" || body == "infinity") return negative ? -INFINITY : INFINITY;
  if (body == "nan") return NAN;
  auto cleaned = StripUnderscores(body);
  if (!cleaned || cleaned->empty()) return std::nullopt;
  // Validate the shape Python accepts: digits[.digits][e[sign]digits] or .digits[...].
  const std::string& t = *cleaned;
  size_t i = 0;
  size_t int_digits = 0, frac_digits = 0;
  while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i]))) ++i, ++int_digits;
  if (i < t.size() && t[i] == '.') {
    ++i;
    while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i]))) ++i, ++frac_digits;
  }
  if (int_digits + frac_digits == 0) return std::nullopt;
  if (i < t.size() && t[i] == 'e') {
    ++i;
    if (i < t.size() && (t[i] == '+' || t[i] == '-')) ++i;
    size_t exp_digits = 0;
    while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i]))) ++i, ++exp_digits;
    if (exp_digits == 0) return std::nullopt;
  }
  if (i != t.size()) return std::nullopt;
  const double v = std::strtod(t.c_str(), nullptr);
  return negative ? -v : v;
}

}  // namespace ember::jinja::py
