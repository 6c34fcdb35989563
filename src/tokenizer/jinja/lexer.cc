#include "tokenizer/jinja/lexer.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <cstdlib>

#include "tokenizer/jinja/pystr.h"

namespace ember::jinja {

std::string Location(int line, int column) {
  return "line " + std::to_string(line) + ", column " + std::to_string(column);
}

namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsNameStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
         static_cast<unsigned char>(c) >= 0x80;
}
bool IsNameChar(char c) { return IsNameStart(c) || IsDigit(c); }

// jinja2 splits the source on \r\n, \r and \n, joins with \n and, without keep_trailing_newline,
// drops one trailing newline.
std::string NormalizeNewlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(source[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string_view source) : src_(NormalizeNewlines(source)) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  Expected<std::vector<Token>> Run() {
    size_t pos = 0;
    bool line_starting = true;  // the previous match ended with a newline (or nothing precedes)
    while (pos < src_.size()) {
      const size_t tag = FindTagStart(pos);
      if (tag == std::string::npos) {
        EmitText(pos, src_.substr(pos));
        break;
      }
      const char type = src_[tag + 1];
      size_t body = tag + 2;
      char sign = 0;
      if (body < src_.size() && (src_[body] == '-' || src_[body] == '+')) sign = src_[body++];
      size_t raw_body = 0;
      const bool raw = type == '%' && MatchRawBegin(body, &raw_body);
      EmitText(pos, StripBeforeTag(src_.substr(pos, tag - pos), sign, type != '{', line_starting));
      if (raw) {
        EMBER_RETURN_IF_ERROR(LexRaw(tag, raw_body, &pos, &line_starting));
      } else if (type == '#') {
        EMBER_RETURN_IF_ERROR(SkipComment(tag, body, &pos, &line_starting));
      } else {
        EMBER_RETURN_IF_ERROR(LexTag(tag, body, type == '{', &pos, &line_starting));
      }
    }
    tokens_.push_back(MakeToken(TokenKind::kEof, src_.size()));
    return std::move(tokens_);
  }

 private:
  size_t FindTagStart(size_t pos) const {
    for (size_t i = src_.find('{', pos); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) {
        return i;
      }
    }
    return std::string::npos;
  }

  // Byte length of the Python whitespace character at `pos`, 0 if there is none.
  size_t SpaceAt(size_t pos) const {
    if (pos >= src_.size()) return 0;
    const auto b = static_cast<unsigned char>(src_[pos]);
    if (b < 0x80) return py::IsSpace(b) ? 1 : 0;
    size_t len = (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 1;
    len = std::min(len, src_.size() - pos);
    const std::u32string cp = py::Decode(std::string_view(src_).substr(pos, len));
    return cp.size() == 1 && py::IsSpace(cp[0]) ? len : 0;
  }

  size_t SkipSpaces(size_t pos) const {
    for (size_t n = SpaceAt(pos); n > 0; n = SpaceAt(pos)) pos += n;
    return pos;
  }

  // Whitespace control on the text before a tag: "-" strips all trailing whitespace; otherwise
  // lstrip_blocks drops the spaces that precede a block or comment tag on its own line.
  static std::string StripBeforeTag(std::string text, char sign, bool lstrip_applies,
                                    bool line_starting) {
    if (sign == '-') return py::Strip(text, std::nullopt, false, true);
    if (sign == '+' || !lstrip_applies) return text;
    const size_t nl = text.rfind('\n');
    const size_t line_begin = nl == std::string::npos ? 0 : nl + 1;
    if (line_begin == 0 && !line_starting) return text;
    const std::string_view tail = std::string_view(text).substr(line_begin);
    if (tail.empty()) return text;
    for (char32_t c : py::Decode(tail)) {
      if (!py::IsSpace(c)) return text;
    }
    text.resize(line_begin);
    return text;
  }

  // "{%" [sign] \s* "raw" \s* ("-%}" \s* | "%}")
  bool MatchRawBegin(size_t pos, size_t* body) const {
    pos = SkipSpaces(pos);
    if (src_.compare(pos, 3, "raw") != 0) return false;
    pos = SkipSpaces(pos + 3);
    if (src_.compare(pos, 3, "-%}") == 0) {
      *body = SkipSpaces(pos + 3);
      return true;
    }
    if (src_.compare(pos, 2, "%}") == 0) {
      *body = pos + 2;  // no trim_blocks after a raw begin, as in jinja2
      return true;
    }
    return false;
  }

  Status LexRaw(size_t tag, size_t body, size_t* pos, bool* line_starting) {
    const bool body_line_starting = src_[body - 1] == '\n';
    for (size_t i = src_.find("{%", body); i != std::string::npos; i = src_.find("{%", i + 1)) {
      size_t p = i + 2;
      char sign = 0;
      if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) sign = src_[p++];
      p = SkipSpaces(p);
      if (src_.compare(p, 6, "endraw") != 0) continue;
      p = SkipSpaces(p + 6);
      size_t end;
      if (src_.compare(p, 3, "+%}") == 0) {
        end = p + 3;
      } else if (src_.compare(p, 3, "-%}") == 0) {
        end = SkipSpaces(p + 3);
      } else if (src_.compare(p, 2, "%}") == 0) {
        end = p + 2;
        if (end < src_.size() && src_[end] == '\n') ++end;
      } else {
        continue;
      }
      EmitText(body, StripBeforeTag(src_.substr(body, i - body), sign, true, body_line_starting));
      *pos = end;
      *line_starting = end > 0 && src_[end - 1] == '\n';
      return Status::Ok();
    }
    return Error(tag, "missing end of raw directive ('{% endraw %}') for the raw block");
  }

  Status SkipComment(size_t tag, size_t body, size_t* pos, bool* line_starting) {
    const size_t close = src_.find("#}", body);
    if (close == std::string::npos) return Error(tag, "missing end of comment tag ('#}')");
    size_t end = close + 2;
    const char before = close > body ? src_[close - 1] : 0;
    if (before == '-') {
      end = SkipSpaces(end);
    } else if (before != '+' && end < src_.size() && src_[end] == '\n') {
      ++end;  // trim_blocks
    }
    *pos = end;
    *line_starting = src_[end - 1] == '\n';
    return Status::Ok();
  }

  Status LexTag(size_t tag, size_t pos, bool variable, size_t* out_pos, bool* line_starting) {
    tokens_.push_back(MakeToken(variable ? TokenKind::kVarBegin : TokenKind::kBlockBegin, tag));
    std::vector<char> balance;
    while (true) {
      if (pos >= src_.size()) {
        return Error(tag, std::string("unexpected end of template: this '") +
                              (variable ? "{{" : "{%") + "' is never closed with '" +
                              (variable ? "}}" : "%}") + "'");
      }
      if (balance.empty()) {
        size_t end = std::string::npos;
        if (variable && src_.compare(pos, 3, "-}}") == 0) {
          end = SkipSpaces(pos + 3);
        } else if (variable && src_.compare(pos, 2, "}}") == 0) {
          end = pos + 2;
        } else if (!variable && src_.compare(pos, 3, "-%}") == 0) {
          end = SkipSpaces(pos + 3);
        } else if (!variable && src_.compare(pos, 3, "+%}") == 0) {
          end = pos + 3;
        } else if (!variable && src_.compare(pos, 2, "%}") == 0) {
          end = pos + 2;
          if (end < src_.size() && src_[end] == '\n') ++end;  // trim_blocks
        }
        if (end != std::string::npos) {
          tokens_.push_back(MakeToken(variable ? TokenKind::kVarEnd : TokenKind::kBlockEnd, pos));
          *out_pos = end;
          *line_starting = src_[end - 1] == '\n';
          return Status::Ok();
        }
      }
      if (const size_t n = SpaceAt(pos); n > 0) {
        pos += n;
        continue;
      }
      EMBER_ASSIGN_OR_RETURN(pos, LexOne(pos, balance));
    }
  }

  // One token inside a tag; returns the position after it.
  Expected<size_t> LexOne(size_t pos, std::vector<char>& balance) {
    const char c = src_[pos];
    if (IsDigit(c)) return LexNumber(pos);
    if (IsNameStart(c)) {
      size_t end = pos;
      while (end < src_.size() && IsNameChar(src_[end]) && SpaceAt(end) == 0) ++end;
      Token t = MakeToken(TokenKind::kName, pos);
      t.value = src_.substr(pos, end - pos);
      tokens_.push_back(std::move(t));
      return end;
    }
    if (c == '\'' || c == '"') return LexString(pos);
    static constexpr std::string_view kTwoChar[] = {"**", "//", "==", "!=", ">=", "<="};
    for (std::string_view op : kTwoChar) {
      if (src_.compare(pos, 2, op) == 0) {
        Token t = MakeToken(TokenKind::kOperator, pos);
        t.value = std::string(op);
        tokens_.push_back(std::move(t));
        return pos + 2;
      }
    }
    static constexpr std::string_view kOneChar = "+-/*%~[](){}><=.:|,;";
    if (kOneChar.find(c) == std::string_view::npos) {
      return Error(pos, "unexpected character '" + std::string(1, c) + "' inside a tag");
    }
    if (c == '(' || c == '[' || c == '{') {
      balance.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    } else if (c == ')' || c == ']' || c == '}') {
      if (balance.empty()) return Error(pos, "unexpected '" + std::string(1, c) + "'");
      if (balance.back() != c) {
        return Error(pos, "unexpected '" + std::string(1, c) + "', expected '" +
                              std::string(1, balance.back()) + "'");
      }
      balance.pop_back();
    }
    Token t = MakeToken(TokenKind::kOperator, pos);
    t.value = std::string(1, c);
    tokens_.push_back(std::move(t));
    return pos + 1;
  }

  // (\d+_)*\d+ starting at pos; npos if there is no digit there.
  size_t MatchDigits(size_t pos) const {
    if (pos >= src_.size() || !IsDigit(src_[pos])) return std::string::npos;
    while (true) {
      while (pos < src_.size() && IsDigit(src_[pos])) ++pos;
      if (pos + 1 < src_.size() && src_[pos] == '_' && IsDigit(src_[pos + 1])) {
        ++pos;
        continue;
      }
      return pos;
    }
  }

  Expected<size_t> LexNumber(size_t pos) {
    const size_t int_end = MatchDigits(pos);
    // A float needs a fraction or an exponent, and never directly follows a dot ("x.0.1" is
    // two subscripts).
    size_t float_end = std::string::npos;
    if (pos == 0 || src_[pos - 1] != '.') {
      size_t frac_end = int_end;
      if (int_end < src_.size() && src_[int_end] == '.') {
        const size_t d = MatchDigits(int_end + 1);
        if (d != std::string::npos) frac_end = d;
      }
      if (frac_end < src_.size() && (src_[frac_end] == 'e' || src_[frac_end] == 'E')) {
        size_t e = frac_end + 1;
        if (e < src_.size() && (src_[e] == '+' || src_[e] == '-')) ++e;
        const size_t d = MatchDigits(e);
        if (d != std::string::npos) float_end = d;
      }
      if (float_end == std::string::npos && frac_end != int_end) float_end = frac_end;
    }
    if (float_end != std::string::npos) {
      std::string text = src_.substr(pos, float_end - pos);
      text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
      Token t = MakeToken(TokenKind::kFloat, pos);
      t.float_value = std::strtod(text.c_str(), nullptr);
      t.value = std::move(text);
      tokens_.push_back(std::move(t));
      return float_end;
    }
    int base = 10;
    size_t digits_begin = pos;
    size_t end = int_end;
    if (src_[pos] == '0' && pos + 1 < src_.size()) {
      const char p = static_cast<char>(src_[pos + 1] | 0x20);
      base = p == 'b' ? 2 : p == 'o' ? 8 : p == 'x' ? 16 : 10;
      if (base != 10) {
        digits_begin = pos + 2;
        end = digits_begin;
        while (end < src_.size() && (src_[end] == '_' || std::isxdigit(static_cast<unsigned char>(src_[end])))) {
          ++end;
        }
      }
    }
    std::string digits = src_.substr(digits_begin, end - digits_begin);
    digits.erase(std::remove(digits.begin(), digits.end(), '_'), digits.end());
    uint64_t value = 0;
    const auto res = std::from_chars(digits.data(), digits.data() + digits.size(), value, base);
    if (digits.empty() || res.ptr != digits.data() + digits.size()) {
      return Error(pos, "invalid integer literal '" + src_.substr(pos, end - pos) + "'");
    }
    if (res.ec != std::errc() || value > static_cast<uint64_t>(INT64_MAX)) {
      return Error(pos, "integer literal '" + src_.substr(pos, end - pos) +
                            "' does not fit in 64 bits");
    }
    Token t = MakeToken(TokenKind::kInt, pos);
    t.int_value = static_cast<int64_t>(value);
    t.value = src_.substr(pos, end - pos);
    tokens_.push_back(std::move(t));
    return end;
  }

  Expected<size_t> LexString(size_t pos) {
    const char quote = src_[pos];
    size_t i = pos + 1;
    while (i < src_.size() && src_[i] != quote) i += src_[i] == '\\' ? 2 : 1;
    if (i >= src_.size()) return Error(pos, "unterminated string literal");
    EMBER_ASSIGN_OR_RETURN(std::string value, DecodeEscapes(pos, src_.substr(pos + 1, i - pos - 1)));
    Token t = MakeToken(TokenKind::kString, pos);
    t.value = std::move(value);
    tokens_.push_back(std::move(t));
    return i + 1;
  }

  // jinja2 decodes literals with Python's "unicode-escape" codec after backslash-escaping any
  // non-ASCII character, so the Python escapes apply and unknown escapes stay as written.
  Expected<std::string> DecodeEscapes(size_t pos, std::string_view body) const {
    std::string out;
    char buf[16];
    for (size_t i = 0; i < body.size(); ++i) {
      if (body[i] != '\\' || i + 1 >= body.size()) {
        out.push_back(body[i]);
        continue;
      }
      const char e = body[++i];
      auto hex = [&](size_t n) -> Expected<char32_t> {
        if (i + n >= body.size()) {
          return Error(pos, "truncated \\" + std::string(1, e) + " escape in string literal");
        }
        uint32_t v = 0;
        const auto res = std::from_chars(body.data() + i + 1, body.data() + i + 1 + n, v, 16);
        if (res.ptr != body.data() + i + 1 + n || v > 0x10FFFF) {
          return Error(pos, "truncated \\" + std::string(1, e) + " escape in string literal");
        }
        i += n;
        return static_cast<char32_t>(v);
      };
      switch (e) {
        case '\n': break;
        case '\\': out.push_back('\\'); break;
        case '\'': out.push_back('\''); break;
        case '"': out.push_back('"'); break;
        case 'a': out.push_back('\a'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        case 'v': out.push_back('\v'); break;
        case 'x': case 'u': case 'U': {
          EMBER_ASSIGN_OR_RETURN(char32_t cp, hex(e == 'x' ? 2 : e == 'u' ? 4 : 8));
          py::AppendUtf8(out, cp);
          break;
        }
        case 'N':
          return Error(pos, "\\N{...} escapes are not supported in string literals");
        default:
          if (e >= '0' && e <= '7') {
            char32_t v = e - '0';
            for (int k = 0; k < 2 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7'; ++k) {
              v = v * 8 + (body[++i] - '0');
            }
            py::AppendUtf8(out, v);
          } else if (static_cast<unsigned char>(e) >= 0x80) {
            // The backslash-escaped non-ASCII character survives as its escape text.
            size_t len = 1;
            while (i + len < body.size() && (static_cast<unsigned char>(body[i + len]) & 0xC0) == 0x80) ++len;
            const char32_t cp = py::Decode(body.substr(i, len))[0];
            std::snprintf(buf, sizeof(buf), cp < 0x100 ? "\\x%02x" : cp < 0x10000 ? "\\u%04x" : "\\U%08x",
                          static_cast<unsigned>(cp));
            out += buf;
            i += len - 1;
          } else {
            out.push_back('\\');
            out.push_back(e);
          }
      }
    }
    return out;
  }

  void EmitText(size_t pos, std::string text) {
    if (text.empty()) return;
    if (!tokens_.empty() && tokens_.back().kind == TokenKind::kText) {
      tokens_.back().value += text;
      return;
    }
    Token t = MakeToken(TokenKind::kText, pos);
    t.value = std::move(text);
    tokens_.push_back(std::move(t));
  }

  Token MakeToken(TokenKind kind, size_t pos) const {
    Token t;
    t.kind = kind;
    LineColumn(pos, &t.line, &t.column);
    return t;
  }

  void LineColumn(size_t pos, int* line, int* column) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), pos) - 1;
    *line = static_cast<int>(it - line_starts_.begin()) + 1;
    *column = static_cast<int>(py::Length(std::string_view(src_).substr(*it, pos - *it))) + 1;
  }

  Status Error(size_t pos, const std::string& message) const {
    int line, column;
    LineColumn(pos, &line, &column);
    return InvalidArgument("template syntax error at " + Location(line, column) + ": " + message);
  }

  std::string src_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
};

}  // namespace

Expected<std::vector<Token>> Tokenize(std::string_view source) { return Lexer(source).Run(); }

}  // namespace ember::jinja
