// ASCII-only text helpers for protocol tokens (host names, header values, flag values), where
// locale-dependent case mapping would be wrong. Bytes outside ASCII pass through unchanged.
#pragma once

#include <string>
#include <string_view>

namespace ember {

inline std::string AsciiLower(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// `text` without leading and trailing spaces and tabs.
inline std::string_view TrimSpacesAndTabs(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

}  // namespace ember
