#include "server/protocol/safe_text.h"

#include <fmt/format.h>

namespace ember::server {
namespace {

// The length of the well-formed UTF-8 sequence starting at text[i], or 0 when the bytes there
// are not one (RFC 3629 table 3-7: the second byte's range depends on the first).
size_t Utf8SequenceLength(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char b0 = byte(i);
  if (b0 < 0x80) return 1;
  size_t length = 0;
  unsigned char lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    length = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    length = 3;
    if (b0 == 0xE0) lo = 0xA0;  // no overlongs
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    length = 4;
    if (b0 == 0xF0) lo = 0x90;  // no overlongs
    if (b0 == 0xF4) hi = 0x8F;  // nothing past U+10FFFF
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k < length; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return length;
}

}  // namespace

std::string SafeText(std::string_view raw, size_t max_bytes) {
  std::string out;
  for (size_t i = 0; i < raw.size();) {
    if (out.size() >= max_bytes) {
      out += "...";
      break;
    }
    const unsigned char c = static_cast<unsigned char>(raw[i]);
    const size_t n = Utf8SequenceLength(raw, i);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (n == 0 || c < 0x20 || c == 0x7F) {
      out += fmt::format("\\x{:02X}", c);
    } else if (n == 2 && c == 0xC2 && static_cast<unsigned char>(raw[i + 1]) < 0xA0) {
      // C1 controls (U+0080..U+009F): CSI among them drives terminals like ESC [ does.
      out += fmt::format("\\u{:04X}", static_cast<unsigned char>(raw[i + 1]));
      i += 2;
      continue;
    } else {
      out.append(raw.substr(i, n));
      i += n;
      continue;
    }
    ++i;
  }
  return out;
}

}  // namespace ember::server
